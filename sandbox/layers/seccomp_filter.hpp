#pragma once
// The worker's syscall filter (libseccomp), installed last, just before exec: anything
// installed earlier would also constrain the jail's own setup. It is built from one table
// (syscall_table.hpp: every call of the architecture brokered, refused, decided by its
// arguments, or harmless, with the reason), and calls newer than the table fail closed. Refused
// calls fail with the table's errno (EPERM; ENOSYS for clone3, openat2 and memory the cap could
// not count; EOPNOTSUPP for extended attributes) rather than killing, so Python reports them as
// OSError.
#include <string>
#include <vector>

#include "sandbox/os/fd.hpp"

namespace belljar {

struct SeccompOptions {
  bool refuse_inet = false;  // degraded mode, no network namespace: AF_INET/AF_INET6 refused too
  // Every call that makes, changes, renames or removes a name (and every open for writing) is
  // stopped and handed to the workspace broker (sandbox/jail/workspace_broker.hpp) through the
  // filter's listener; hard links are refused outright.
  bool broker = false;
  // No cgroup counts the session's CPU: the supervisor adds it up from /proc, where a child's
  // CPU reaches its parent's cutime only when the parent reaps it. A child the kernel reaps by
  // itself (its parent's SIGCHLD ignored, or SA_NOCLDWAIT) is counted by no one, so setting
  // SIGCHLD's action is refused (EPERM); asking what it is (act == NULL) still passes.
  bool cpu_by_process_tree = false;
};

// The calls the broker decides, by name (open and openat only when they may write), for
// `belljar check` and the tests.
const std::vector<std::string>& brokered_syscalls();

// Names of the syscalls refused outright, for `belljar check` and the tests.
const std::vector<std::string>& refused_syscalls();

// Loads the filter into the calling thread (and what it execs). Throws SetupError. With
// `broker`, returns the filter's listener (close-on-exec): whoever holds it answers the
// brokered calls, so it must leave this process before exec.
Fd install_seccomp(const SeccompOptions& options);

// The filter as libseccomp's pseudo-code, for debugging and tests.
std::string seccomp_pseudo_code(const SeccompOptions& options);

}  // namespace belljar
