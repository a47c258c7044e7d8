#pragma once
// The worker's last steps before Python, in the order ARCHITECTURE.md gives: a new session, its
// identity, limits, (Landlock), no capabilities, no_new_privs, and seccomp last, right before exec.
#include <sys/types.h>

#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox/layers/landlock.hpp"
#include "sandbox/layers/rlimits.hpp"
#include "sandbox/layers/seccomp_filter.hpp"

namespace belljar {

struct WorkerExecOptions {
  bool switch_user = false;  // landlock mode as root: become the sandbox user first
  uid_t uid = 0;
  gid_t gid = 0;
  RlimitPlan limits;
  bool landlock = false;
  LandlockRules landlock_rules;
  SeccompOptions seccomp;
  // With seccomp.broker: the socket the filter's listener goes out on, to the warden's broker.
  int broker_channel = -1;
};

// Runs in the freshly forked worker, whose fds 0-3 are already the documented ones. On any
// failure it writes the error text to error_fd (close-on-exec: an exec that succeeds closes it
// with nothing written) and exits 127.
[[noreturn]] void exec_worker(const JailSpec& spec, const WorkerExecOptions& options,
                              int error_fd) noexcept;

}  // namespace belljar
