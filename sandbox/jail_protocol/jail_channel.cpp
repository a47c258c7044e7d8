#include "sandbox/jail_protocol/jail_channel.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace belljar {

namespace {

constexpr size_t kHeader = 4;

size_t frame_length(std::string_view header) {
  size_t n = 0;
  for (size_t i = 0; i < kHeader; ++i) n = (n << 8) | static_cast<unsigned char>(header[i]);
  return n;
}

bool write_all(int fd, std::string_view bytes) noexcept {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly `size` bytes (blocking); false at EOF or on an error.
bool read_exactly(int fd, char* into, size_t size, std::string* why) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, into + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (why)
        *why = n == 0 ? "the channel closed mid-frame" : "read: errno " + std::to_string(errno);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string frame_of(std::string_view record) {
  std::string frame;
  frame.reserve(kHeader + record.size());
  auto n = static_cast<uint32_t>(record.size());
  for (int shift = 24; shift >= 0; shift -= 8)
    frame.push_back(static_cast<char>((n >> shift) & 0xff));
  frame.append(record);
  return frame;
}

bool send_frame(int fd, std::string_view record) noexcept {
  if (record.size() > UINT32_MAX) return false;
  try {
    return write_all(fd, frame_of(record));
  } catch (...) {
    return false;
  }
}

std::optional<std::string> read_frame(int fd, size_t cap, std::string* why) {
  char header[kHeader];
  if (!read_exactly(fd, header, kHeader, why)) return std::nullopt;
  size_t size = frame_length(std::string_view(header, kHeader));
  if (size > cap) {
    if (why)
      *why =
          "a frame of " + std::to_string(size) + " bytes, over the cap of " + std::to_string(cap);
    return std::nullopt;
  }
  std::string body(size, '\0');
  if (!read_exactly(fd, body.data(), size, why)) return std::nullopt;
  return body;
}

bool FrameReader::fill() {
  // A blocking descriptor gets one read per fill() (poll said readable once).
  const bool blocking = (::fcntl(fd_, F_GETFL) & O_NONBLOCK) == 0;
  char chunk[4096];
  for (;;) {
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n > 0) {
      if (buffer_.size() + static_cast<size_t>(n) > 2 * cap_ + kHeader) {
        broken_ = true;
        buffer_.clear();
        return closed_;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
      if (blocking) return closed_;
      continue;
    }
    if (n == 0)
      closed_ = true;
    else if (errno == EINTR)
      continue;
    return closed_;
  }
}

std::optional<std::string> FrameReader::next() {
  if (broken_ || buffer_.size() < kHeader) return std::nullopt;
  size_t size = frame_length(buffer_);
  if (size > cap_) {
    broken_ = true;
    buffer_.clear();
    return std::nullopt;
  }
  if (buffer_.size() < kHeader + size) return std::nullopt;
  std::string frame = buffer_.substr(kHeader, size);
  buffer_.erase(0, kHeader + size);
  return frame;
}

}  // namespace belljar
