#include "sandbox/os/fd_passing.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace belljar {

int send_fd(int channel, int fd) noexcept {
  char byte = 'c';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  for (;;) {
    if (::sendmsg(channel, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) return 0;
    if (errno != EINTR) return errno;
  }
}

Fd receive_fd(int channel, int& status) noexcept {
  char byte;
  iovec iov{&byte, 1};
  // Room for a few: whatever arrives must be seen to be closed.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = ::recvmsg(channel, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n < 0) {
    status = errno;
    return Fd();
  }
  if (n == 0) {
    status = -1;
    return Fd();
  }
  status = 0;
  Fd first;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      if (!first)
        first.reset(fd);
      else
        ::close(fd);
    }
  }
  return first;
}

}  // namespace belljar
