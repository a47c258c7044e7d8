#include "sandbox/layers/rlimits.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <string>

#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

void cap(int resource, const char* name, uint64_t value) {
  rlimit current{};
  if (::getrlimit(resource, &current) != 0) throw_errno(std::string("getrlimit(") + name + ")");
  rlim_t limit = static_cast<rlim_t>(value);
  if (current.rlim_max != RLIM_INFINITY) limit = std::min(limit, current.rlim_max);
  rlimit wanted{limit, limit};
  if (::setrlimit(resource, &wanted) != 0)
    throw_errno(std::string("setrlimit(") + name + ", " + std::to_string(limit) + ")");
}

}  // namespace

void apply_rlimits(const RlimitPlan& plan) {
  cap(RLIMIT_CORE, "RLIMIT_CORE", 0);
  if (plan.file_size) cap(RLIMIT_FSIZE, "RLIMIT_FSIZE", plan.file_size);
  if (plan.open_files) cap(RLIMIT_NOFILE, "RLIMIT_NOFILE", plan.open_files);
  if (plan.memory) {
    cap(RLIMIT_AS, "RLIMIT_AS", plan.memory);
    cap(RLIMIT_DATA, "RLIMIT_DATA", plan.memory);
  }
  // Counted per user in the sandbox's own user namespace, so it caps the sandbox's tasks
  // (processes and threads), not the host user's.
  if (plan.processes) cap(RLIMIT_NPROC, "RLIMIT_NPROC", plan.processes);
}

}  // namespace belljar
