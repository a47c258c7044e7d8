#pragma once
// A sandbox's cgroup: the session's memory and process caps, and its CPU and memory use.
// cgroup v2 when this host delegates memory and pids to us, v1 controllers when that is what
// the host offers (and we may write them, i.e. as root); otherwise none, and rlimits do the job.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/jail_protocol/jail_reports.hpp"

namespace belljar {

// Where a sandbox cgroup can be created, found by trying (mkdir + rmdir of a probe).
struct CgroupParents {
  std::string v2;         // a v2 directory whose children get the memory and pids controllers
  std::string v1_memory;  // v1 controller directories (our own cgroup in each hierarchy)
  std::string v1_pids;
  std::string v1_cpuacct;
  std::vector<std::string> notes;  // why something is not usable, for `belljar check`
  bool memory() const { return !v2.empty() || !v1_memory.empty(); }
  bool pids() const { return !v2.empty() || !v1_pids.empty(); }
};

CgroupParents find_cgroup_parents();

class SandboxCgroup {
 public:
  SandboxCgroup() = default;
  // The cgroup the warden made, as its ready report names it (the supervisor's handle).
  explicit SandboxCgroup(CgroupPaths paths) : paths_(std::move(paths)) {}
  // Creates `name` under every usable parent and writes the limits. Throws SetupError.
  static SandboxCgroup create(const CgroupParents& parents, const std::string& name,
                              uint64_t memory_bytes, uint64_t pids);
  void attach(pid_t pid) const;  // throws SetupError

  bool limits_memory() const { return !paths_.v2.empty() || !paths_.memory.empty(); }
  bool limits_pids() const { return !paths_.v2.empty() || !paths_.pids.empty(); }
  // Whether cpu_seconds() reads a cgroup's count (v2's cpu.stat, v1's cpuacct): without one the
  // session's CPU is added up from /proc, process by process.
  bool counts_cpu() const { return !paths_.v2.empty() || !paths_.cpuacct.empty(); }
  bool empty() const { return paths_.empty(); }
  const CgroupPaths& paths() const { return paths_; }

  double cpu_seconds() const;          // < 0 when unknown
  uint64_t peak_memory_bytes() const;  // 0 when unknown
  uint64_t oom_kills() const;          // times the OOM killer acted inside
  void kill_all() const;               // SIGKILL every task in it
  // Moves the memory cap (a %%limits cell tightening it, then back). False with *why set when
  // there is no memory cgroup or the kernel refuses (v1: usage already above the new cap).
  bool set_memory_limit(uint64_t bytes, std::string* why) const;
  bool remove() const;  // rmdir; true once every directory is gone
  // remove(), retried for up to a second: rmdir fails while killed tasks are still being torn
  // down. True once every directory is gone.
  bool remove_after_kill() const;
  std::string describe() const;

 private:
  CgroupPaths paths_;
};

}  // namespace belljar
