#pragma once
// The newest entries of a record a session keeps adding to (the history, the audit records
// %audit shows), within a count and a byte bound: the oldest are dropped first. An agent may
// run tens of thousands of cells in one session, and whatever the supervisor keeps per cell
// must stop growing somewhere; bytes need a bound as much as the count, since one cell's code
// can be megabytes. Within the count, the newest entry is always kept, even alone over the byte
// bound: it is the one a reader asks for first, and the request that made it held as much.
#include <cstddef>
#include <deque>
#include <utility>

namespace belljar {

template <class T>
class NewestEntries {
 public:
  NewestEntries(size_t max_entries, size_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // `bytes`: what the entry holds beyond its fixed size (its text), as the bound counts it.
  void push(T value, size_t bytes) {
    entries_.push_back({std::move(value), bytes});
    bytes_ += bytes;
    while (entries_.size() > max_entries_ || (entries_.size() > 1 && bytes_ > max_bytes_)) {
      bytes_ -= entries_.front().bytes;
      entries_.pop_front();
    }
  }
  // Oldest first.
  size_t size() const { return entries_.size(); }
  const T& operator[](size_t i) const { return entries_[i].value; }
  size_t bytes() const { return bytes_; }
  size_t max_entries() const { return max_entries_; }

 private:
  struct Entry {
    T value;
    size_t bytes;
  };
  size_t max_entries_, max_bytes_;
  std::deque<Entry> entries_;
  size_t bytes_ = 0;
};

}  // namespace belljar
