#pragma once
// An owning file descriptor: every descriptor belljar opens is closed on every path.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>

namespace belljar {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// openat2(2) with RESOLVE_* flags in `resolve` (glibc has no wrapper); O_CLOEXEC is always added.
// A descriptor, or -1 with errno.
inline int openat2_fd(int dirfd, const std::string& path, uint64_t flags, uint64_t resolve) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how));
}

// Everything written to `fd` until the writer closes it (a child's error pipe: empty means it
// went on without a word, as exec does on success).
inline std::string read_to_eof(int fd) {
  std::string text;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace belljar
