#pragma once
// The session's memory, summed over every process in the jail, for hosts that give the sandbox
// no memory cgroup (an unprivileged kernel, the common case).
//
// The threat: without a cgroup, --memory is RLIMIT_AS, a cap per process. Forked children each
// get their own, so eight children hold eight times the cap. (memfds and SysV shared memory,
// which no process's mappings show, are refused by seccomp instead; see seccomp_filter.cpp.)
// The warden, outside the jail, samples the jail's total and stops the sandbox when it passes
// --memory, as the cgroup's OOM killer would.
//
// What counts: private anonymous memory and shared memory (tmpfs pages mapped, shared
// anonymous mappings) as the proportional set size, so a page shared by a forked pool counts
// once, not once per process. File pages (libraries, mapped files) are page cache the kernel can
// reclaim; a cgroup would reclaim them before killing anything, so they do not count.
//
// Cost: a sample reads /proc/PID/schedstat and /proc/PID/status of each process (CPU time, and
// the RssAnon + RssShmem counters: an upper bound of what counts). Only when those bounds add up
// past the cap are the exact figures read from /proc/PID/smaps_rollup (a page-table walk).
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace belljar {

// The processes under `root` (children of every thread, recursively); `root` itself first
// when include_root. Bounded: at most `limit` processes are listed.
std::vector<pid_t> jail_processes(pid_t root, bool include_root, size_t limit = 8192);

class SessionMemory {
 public:
  // How often to look: often while anything in the jail runs (memory grows only by running
  // code: page faults are charged to the faulting task's CPU time), rarely while it is idle.
  static constexpr std::chrono::milliseconds kBusyInterval{20};
  static constexpr std::chrono::milliseconds kIdleInterval{200};

  SessionMemory(pid_t root, bool include_root, uint64_t cap_bytes)
      : root_(root), include_root_(include_root), cap_(cap_bytes) {}

  struct Sample {
    uint64_t bound = 0;  // sum of RssAnon + RssShmem: never below the exact figure
    uint64_t exact = 0;  // Pss_Anon + Pss_Shmem summed; only read when `bound` passed the cap
    bool busy = false;   // CPU time moved (or processes came and went) since the last sample
    bool over = false;   // `exact` is above the cap
  };
  Sample sample();

  // When the next sample is due after `last`.
  std::chrono::milliseconds interval(const Sample& last) const {
    return last.busy ? kBusyInterval : kIdleInterval;
  }
  uint64_t cap() const { return cap_; }

 private:
  pid_t root_;
  bool include_root_;
  uint64_t cap_;
  uint64_t last_cpu_ns_ = 0;
  size_t last_count_ = 0;
};

// In the jail's init, while it holds capabilities in its own IPC namespace: SysV shared memory,
// message queues and semaphores get limits of zero there. seccomp already refuses their get
// calls (ENOSYS); this is the second wall, where the kernel lets an IPC namespace's owner set
// them (Linux 5.19 and later). False when the kernel would not.
bool zero_sysv_ipc_limits();

// Pss_Anon + Pss_Shmem of one process from /proc/PID/smaps_rollup; its RssAnon + RssShmem
// when the kernel has no smaps_rollup split; 0 when the process is gone.
uint64_t counted_memory(pid_t pid);

}  // namespace belljar
