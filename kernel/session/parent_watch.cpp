#include "kernel/session/parent_watch.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace belljar {

namespace {
bool is_parent(pid_t pid) {
  return ::getppid() == pid;
}
}  // namespace

ParentWatch ParentWatch::from_environment(const char* asked) {
  if (!asked || !*asked) return {};
  pid_t parent = ::getppid();
  if (parent <= 1) return {};  // init from the start: no client to follow
  return of(parent, is_parent);
}

ParentWatch ParentWatch::of(pid_t pid, bool (*still_parent)(pid_t)) {
  ParentWatch watch;
  watch.pid_ = pid;
  int opened = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  int error = errno;
  watch.pidfd_.reset(opened);
  // The pid was the parent's when read; opened after it exited, the pidfd may name a process
  // that took the number since (or none: ESRCH). Still the parent now means it is the same one.
  if (!watch.pidfd_ && error != ESRCH) return {};  // no pidfds here (before Linux 5.3)
  if (!watch.pidfd_ || !still_parent(pid)) {
    watch.pidfd_.reset();
    watch.gone_ = true;
  }
  return watch;
}

}  // namespace belljar
