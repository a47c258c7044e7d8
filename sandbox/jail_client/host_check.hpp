#pragma once
// What this host can enforce (`belljar check`), and whether a policy can be: fail closed.
// Namespaces are probed by trying them (fork + unshare in the child), not by reading sysctls.
#include <string>
#include <vector>

#include "sandbox/layers/cgroup.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

struct LayerReport {
  bool running_as_root = false;
  bool user_ns = false;
  std::string user_ns_problem;  // why not, naming the switch that turns them off
  bool mount_ns = false, pid_ns = false, net_ns = false, ipc_ns = false, uts_ns = false,
       cgroup_ns = false;
  bool fresh_proc = false;  // a procfs can be mounted in them (not below a masked /proc)
  std::string ns_problem;   // the first unshare() (or the /proc mount) that failed
  bool seccomp = false;     // seccomp filters with errno actions and user notification
  int landlock_abi = 0;     // 0: no Landlock
  CgroupParents cgroups;    // where a sandbox cgroup can go (empty: rlimits instead)

  bool all_namespaces() const {
    return user_ns && mount_ns && pid_ns && net_ns && ipc_ns && uts_ns && cgroup_ns && fresh_proc;
  }

  struct Line {
    std::string layer;
    bool available = false;
    std::string detail;
  };
  std::vector<Line> lines() const;
};

LayerReport probe_host_layers();
const LayerReport& host_layers();  // probed once per process, then remembered

struct EnforcementPlan {
  Isolation isolation = Isolation::strict;
  bool enforceable = false;
  bool namespaces = false;           // the full jail; false: Landlock + seccomp + rlimits
  std::vector<std::string> uses;     // the layers this policy gets, one line each
  std::vector<std::string> missing;  // what it would want and this host lacks
  std::string refusal;               // one line naming the missing layer and the fix
  std::string text() const;          // the plan as `belljar check` prints it
};

// Which layers `policy` will use on this host and whether it can be enforced. As root, also
// tries the workspace's idmapped mount (a probe of a few syscalls).
EnforcementPlan plan_enforcement(const Policy& policy, const LayerReport& host);

// The whole `belljar check` text: the host's layers, then the policy's plan.
std::string describe_check(const LayerReport& host, const EnforcementPlan& plan);

}  // namespace belljar
