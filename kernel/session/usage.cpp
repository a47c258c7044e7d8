#include "kernel/session/usage.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "sandbox/os/small_file.hpp"

namespace belljar {

namespace {
// The number after `key` in a "Key: value [kB]" file (/proc/PID/status, /proc/meminfo).
uint64_t keyed_number(const std::string& text, std::string_view key) {
  auto fields = words(text);
  for (size_t i = 0; i + 1 < fields.size(); ++i)
    if (fields[i] == key) return parse_unsigned(fields[i + 1]).value_or(0);
  return 0;
}

uint64_t resident_bytes(pid_t pid) {
  return keyed_number(read_small_file("/proc/" + std::to_string(pid) + "/status"), "VmRSS:") * 1024;
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
  std::string meminfo = read_small_file("/proc/meminfo");
  uint64_t total = keyed_number(meminfo, "MemTotal:") * 1024,
           available = keyed_number(meminfo, "MemAvailable:") * 1024,
           free = keyed_number(meminfo, "MemFree:") * 1024;
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

  // The first line: "cpu  user nice system idle iowait irq softirq steal ...", in ticks.
  std::string stat = read_small_file("/proc/stat", 4096);
  auto fields = words(lines(stat).empty() ? std::string_view() : lines(stat).front());
  auto tick = [&](size_t i) {
    return i < fields.size() ? parse_unsigned(fields[i]).value_or(0) : 0;
  };
  unsigned long long user = tick(1), nice = tick(2), system = tick(3), idle = tick(4),
                     iowait = tick(5), irq = tick(6), softirq = tick(7), steal = tick(8);
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
