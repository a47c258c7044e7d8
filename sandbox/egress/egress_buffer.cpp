// The egress proxy's byte queue: recv() into the tail, send() from the front (egress_buffer.hpp).
#include "sandbox/egress/egress_buffer.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace belljar {

ssize_t Buffer::fill(int fd, size_t limit) {
  size_t want = std::min(space(), limit);
  if (want == 0) {
    errno = EAGAIN;
    return -1;
  }
  reserve_tail(want);
  ssize_t n;
  while ((n = ::recv(fd, data_.data() + end_, want, 0)) < 0 && errno == EINTR) {
  }
  if (n > 0) end_ += static_cast<size_t>(n);
  return n;
}

ssize_t Buffer::drain(int fd, size_t limit) {
  size_t want = std::min(size(), limit);
  if (want == 0) return 0;
  ssize_t n;
  while ((n = ::send(fd, data_.data() + start_, want, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (n > 0) consume(static_cast<size_t>(n));
  return n;
}

void Buffer::consume(size_t n) {
  start_ += std::min(n, size());
  if (start_ == end_) start_ = end_ = 0;
}

void Buffer::splice(size_t offset, size_t length, std::string_view with) {
  std::string rebuilt;
  rebuilt.reserve(size() - length + with.size());
  std::string_view current = view();
  rebuilt.append(current.substr(0, offset));
  rebuilt.append(with);
  rebuilt.append(current.substr(offset + length));
  data_.assign(rebuilt.begin(), rebuilt.end());
  start_ = 0;
  end_ = rebuilt.size();
}

void Buffer::reserve_tail(size_t want) {
  if (data_.size() - end_ >= want) return;
  if (start_ > 0) {
    std::memmove(data_.data(), data_.data() + start_, size());
    end_ -= start_;
    start_ = 0;
  }
  if (data_.size() - end_ < want) data_.resize(end_ + want);
}

}  // namespace belljar
