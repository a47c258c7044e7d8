#pragma once
// The worker's last steps before Python, in the order ARCHITECTURE.md gives: a new session, its
// identity, limits, (Landlock), no capabilities, no_new_privs, and seccomp last, right before exec.
// What those steps apply is worked out in one place, worker_exec_options, for both modes: the
// warden forks the worker itself in landlock mode, jail init does in namespaces mode, and a
// limit carried by the spec reaches the worker the same way in each.
#include <sys/types.h>

#include <string>

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

// Which session caps a cgroup already enforces or counts, as the warden found its cgroup (jail
// init: the go byte's kGo* flags). A cap no cgroup holds falls to a per-process rlimit.
struct CgroupCaps {
  bool memory = false;
  bool pids = false;
  bool cpu = false;
};

// The worker's exec options from the spec and what differs by where the worker is forked:
// the cgroup's caps, the broker's channel (the worker's end; -1 without the broker) and, in
// landlock mode, the private session directory that is its home and /tmp. In landlock mode the
// worker becomes the sandbox user itself (as root), refuses inet sockets (no network namespace)
// and is confined by Landlock to the binds, a few /etc files, /proc, /dev and the session
// directory; in namespaces mode the mount namespace does that and init has set the identity.
WorkerExecOptions worker_exec_options(const JailSpec& spec, CgroupCaps cgroup, int broker_channel,
                                      const std::string& session_dir);

// Runs in the freshly forked worker, whose fds 0-3 are already the documented ones. On any
// failure it writes the error text to error_fd (close-on-exec: an exec that succeeds closes it
// with nothing written) and exits 127.
[[noreturn]] void exec_worker(const JailSpec& spec, const WorkerExecOptions& options,
                              int error_fd) noexcept;

}  // namespace belljar
