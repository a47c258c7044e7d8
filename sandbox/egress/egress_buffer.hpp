#pragma once
// The egress proxy's per-connection byte queue, one each way (see egress_relay.hpp).
//
// The threat is a client or upstream that sends faster than the other side reads: the buffer
// has a soft cap, and reads stop at it (that is the backpressure), so a connection never holds
// more than its share of the supervisor's memory. The proxy's own edits (a rewritten request
// or response head) may briefly pass the cap. Memory comes on first use.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace belljar {

class Buffer {
 public:
  explicit Buffer(size_t capacity = 0) : capacity_(capacity) {}
  size_t size() const { return end_ - start_; }
  bool empty() const { return start_ == end_; }
  size_t space() const { return size() >= capacity_ ? 0 : capacity_ - size(); }
  std::string_view view() const { return {data_.data() + start_, size()}; }

  // One recv() of at most min(space(), limit) bytes; returns as recv() does (EAGAIN when there
  // is no room).
  ssize_t fill(int fd, size_t limit = SIZE_MAX);
  // One send() of at most `limit` bytes from the front; returns as send() does.
  ssize_t drain(int fd, size_t limit = SIZE_MAX);
  void append(std::string_view bytes) { splice(size(), 0, bytes); }
  void consume(size_t n);
  // Replaces `length` bytes at `offset` (from the front) with `with`.
  void splice(size_t offset, size_t length, std::string_view with);

 private:
  void reserve_tail(size_t want);
  std::vector<char> data_;
  size_t start_ = 0, end_ = 0;
  size_t capacity_;
};

}  // namespace belljar
