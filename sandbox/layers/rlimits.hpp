#pragma once
// Per-process resource limits of the worker. The session-wide caps (memory, processes) are the
// cgroup's job when there is one; these rlimits stand in for it when there is not.
#include <cstdint>

namespace belljar {

struct RlimitPlan {
  uint64_t file_size = 0;   // RLIMIT_FSIZE: the largest file written (EFBIG past it)
  uint64_t open_files = 0;  // RLIMIT_NOFILE
  uint64_t memory = 0;      // RLIMIT_AS and RLIMIT_DATA; 0 when a memory cgroup caps the session
  uint64_t processes = 0;   // RLIMIT_NPROC; 0 when a pids cgroup caps the session
};

// Core dumps off always. Hard limits are lowered with the soft ones so the worker cannot raise
// them back. Throws SetupError naming the resource.
void apply_rlimits(const RlimitPlan& plan);

}  // namespace belljar
