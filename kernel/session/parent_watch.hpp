#pragma once
// The client that started the kernel, followed as ipykernel follows it: jupyter_client sets
// JPY_PARENT_PID to its own pid when it launches a kernel, and a kernel whose client was killed
// (a test run aborted, a notebook server gone) shuts down rather than keep a sandbox running for
// no one. The kernel watches its own parent process through a pidfd, which becomes readable
// when that process exits; with JPY_PARENT_PID unset, or a parent that is init already (a
// container's entry point), nothing is watched.
#include <sys/types.h>

#include "sandbox/os/fd.hpp"

namespace belljar {

class ParentWatch {
 public:
  ParentWatch() = default;
  // `asked`: JPY_PARENT_PID's value, or null. Watches getppid() when asked is a pid (any: a
  // launcher script between the client and the kernel is the parent then).
  static ParentWatch from_environment(const char* asked);
  // Watches `pid` (the parent, as getppid() gave it); gone() when it exited before it was
  // watched (`still_parent`, read after the pidfd was opened, says whether it still is).
  static ParentWatch of(pid_t pid, bool (*still_parent)(pid_t));

  int fd() const { return pidfd_.get(); }  // -1 when nothing is watched
  pid_t pid() const { return pid_; }
  bool gone() const { return gone_; }  // the parent had exited already

 private:
  Fd pidfd_;
  pid_t pid_ = 0;
  bool gone_ = false;
};

}  // namespace belljar
