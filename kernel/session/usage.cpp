#include "kernel/session/usage.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace belljar {

namespace {
uint64_t resident_bytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

// The supervisor's open descriptors (a leak shows here first; the supervisor is not dumpable,
// so an unprivileged operator cannot count them in /proc itself). The directory's own is not.
size_t open_descriptors() {
  std::error_code ec;
  size_t count = 0;
  std::filesystem::directory_iterator it("/proc/self/fd", ec), end;
  for (; !ec && it != end; it.increment(ec)) ++count;
  return count > 0 ? count - 1 : 0;
}

double own_cpu_seconds() {
  rusage self{};
  ::getrusage(RUSAGE_SELF, &self);
  return self.ru_utime.tv_sec + self.ru_stime.tv_sec +
         (self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
}

nlohmann::json host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t value = 0, total = 0, available = 0, free = 0;
  std::string unit;
  while (meminfo >> key >> value) {
    std::getline(meminfo, unit);
    if (key == "MemTotal:")
      total = value * 1024;
    else if (key == "MemAvailable:")
      available = value * 1024;
    else if (key == "MemFree:")
      free = value * 1024;
  }
  double percent = total ? 100.0 * double(total - available) / double(total) : 0;
  return {{"total", total},
          {"available", available},
          {"percent", percent},
          {"used", total - available},
          {"free", free}};
}
}  // namespace

nlohmann::json UsageSampler::sample(pid_t worker_pid, double worker_cpu_seconds) {
  auto now = std::chrono::steady_clock::now();
  double kernel_cpu = own_cpu_seconds() + worker_cpu_seconds;
  double elapsed =
      last_ == decltype(last_){} ? 0 : std::chrono::duration<double>(now - last_).count();
  double kernel_percent = elapsed > 0 ? 100.0 * (kernel_cpu - last_kernel_cpu_) / elapsed : 0;

  std::ifstream stat("/proc/stat");
  std::string cpu;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                     steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  unsigned long long busy = user + nice + system + irq + softirq + steal,
                     total = busy + idle + iowait;
  double host_percent =
      total > last_host_total_ && last_host_total_
          ? 100.0 * double(busy - last_host_busy_) / double(total - last_host_total_)
          : 0;
  last_ = now;
  last_kernel_cpu_ = kernel_cpu;
  last_host_busy_ = busy;
  last_host_total_ = total;

  char hostname[256] = {0};
  ::gethostname(hostname, sizeof hostname - 1);
  uint64_t memory = resident_bytes(::getpid()) + (worker_pid > 0 ? resident_bytes(worker_pid) : 0);
  return {{"hostname", hostname},
          {"pid", ::getpid()},
          {"kernel_cpu", kernel_percent},
          {"kernel_memory", memory},
          {"kernel_open_fds", open_descriptors()},
          {"host_cpu_percent", host_percent},
          {"cpu_count", ::sysconf(_SC_NPROCESSORS_ONLN)},
          {"host_virtual_memory", host_memory()}};
}

}  // namespace belljar
