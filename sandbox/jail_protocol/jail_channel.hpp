#pragma once
// How records (record.hpp) travel between the supervisor and the jail's processes: init ->
// warden over a pipe, supervisor <-> warden over the control socket. A frame is a 4-byte
// big-endian length, then that many bytes of one record. Readers are bounded: a frame larger
// than the reader's cap, or more unread bytes than twice that, breaks the channel (a jail
// that floods it is broken, and the supervisor stops it) instead of growing a buffer.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace belljar {

// The largest report (a survey naming many guards, the notes of a degraded start) is far below
// this; the spec, sent once, has a cap of its own (kMaxSpecBytes, jail_spec.hpp).
inline constexpr size_t kMaxReportBytes = 1u << 20;

// The frame of one record: its length, then the record.
std::string frame_of(std::string_view record);

// Writes one frame, in one write where the descriptor takes it whole (a pipe's report under
// PIPE_BUF is then atomic). On a socket MSG_NOSIGNAL keeps a gone reader from killing the
// writer with SIGPIPE; init's pipe has only the warden at its other end, and init dies with the
// warden. False when the reader is gone.
bool send_frame(int fd, std::string_view record) noexcept;

// Reads exactly one frame from a blocking descriptor (the warden's spec): nullopt with *why
// set at EOF, on an error, or when the frame is larger than `cap`.
std::optional<std::string> read_frame(int fd, size_t cap, std::string* why);

// Splits what arrives on a descriptor into frames.
class FrameReader {
 public:
  FrameReader(int fd, size_t cap = kMaxReportBytes) : fd_(fd), cap_(cap) {}
  // Reads what is there: one read() on a blocking descriptor (call it when poll says
  // readable), until EAGAIN on a non-blocking one. Returns whether the writer has closed.
  bool fill();
  // The next complete frame, if any.
  std::optional<std::string> next();
  bool closed() const { return closed_; }
  // A frame over the cap arrived, or too much unread: the channel can't be trusted further.
  bool broken() const { return broken_; }

 private:
  int fd_;
  size_t cap_;
  std::string buffer_;
  bool closed_ = false;
  bool broken_ = false;
};

}  // namespace belljar
