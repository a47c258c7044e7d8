#pragma once
// usage_request (control channel), answered as recent ipykernel does: the kernel's CPU and
// memory (supervisor plus sandbox) and the host's, read from /proc.
#include <sys/types.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace belljar {

class UsageSampler {
 public:
  // worker_pid: the Python process as the host sees it (-1 if none); worker_cpu: its sandbox's
  // CPU seconds so far. CPU percentages are over the time since the previous sample.
  nlohmann::json sample(pid_t worker_pid, double worker_cpu_seconds);

 private:
  std::chrono::steady_clock::time_point last_{};
  double last_kernel_cpu_ = 0;
  unsigned long long last_host_busy_ = 0, last_host_total_ = 0;
};

}  // namespace belljar
