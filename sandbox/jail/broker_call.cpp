#include "sandbox/jail/broker_call.hpp"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sandbox/jail/sandbox_paths.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

bool BrokerCall::still_waiting() const {
  uint64_t copy = id;
  return ::ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &copy) == 0;
}

void BrokerCall::reply(int error, int64_t value) {
  if (answered) return;
  answered = true;
  seccomp_notif_resp resp{};
  resp.id = id;
  resp.error = error ? -error : 0;
  resp.val = error ? 0 : value;
  ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

void BrokerCall::let_run() {
  if (answered) return;
  answered = true;
  seccomp_notif_resp resp{};
  resp.id = id;
  resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

void BrokerCall::reply_fd(int fd, bool cloexec) {
  if (answered) return;
  answered = true;
  seccomp_notif_addfd add{};
  add.id = id;
  add.flags = SECCOMP_ADDFD_FLAG_SEND;
  add.srcfd = static_cast<uint32_t>(fd);
  add.newfd_flags = cloexec ? O_CLOEXEC : 0;
  if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0 && errno != ENOENT) {
    answered = false;
    reply(errno == EMFILE ? EMFILE : EIO);
  }
}

ssize_t read_memory(pid_t pid, uint64_t address, char* buf, size_t want) {
  // A property of where the warden runs, learnt once: the broker's thread alone reads it.
  static bool through_proc = false;
  if (!through_proc) {
    iovec local{buf, want}, remote{reinterpret_cast<void*>(address), want};
    ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n >= 0 || (errno != EPERM && errno != ENOSYS)) return n;
    through_proc = true;
  }
  Fd mem(::open(proc_path(pid, "mem").c_str(), O_RDONLY | O_CLOEXEC));
  if (!mem) return -1;
  return ::pread(mem.get(), buf, want, static_cast<off_t>(address));
}

int read_string(pid_t pid, uint64_t address, std::string& out) {
  if (address == 0) return EFAULT;
  out.clear();
  const uint64_t page = 4096;
  while (out.size() < kMaxPathBytes) {
    char buf[4096];
    size_t want = static_cast<size_t>(page - (address % page));
    ssize_t n = read_memory(pid, address, buf, want);
    if (n <= 0) return n == 0 ? EFAULT : (errno == ESRCH ? ESRCH : EFAULT);
    const char* end = static_cast<const char*>(std::memchr(buf, '\0', static_cast<size_t>(n)));
    if (end) {
      out.append(buf, static_cast<size_t>(end - buf));
      return out.size() < kMaxPathBytes ? 0 : ENAMETOOLONG;
    }
    out.append(buf, static_cast<size_t>(n));
    address += static_cast<uint64_t>(n);
  }
  return ENAMETOOLONG;
}

std::string proc_path(pid_t pid, const std::string& rest) {
  return "/proc/" + std::to_string(pid) + "/" + rest;
}

}  // namespace belljar
