#include "sandbox/jail/jail_memory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "sandbox/os/small_file.hpp"

namespace belljar {

namespace {

// The kB figure of a "Name:   123 kB" line, in bytes; 0 if absent.
uint64_t kb_field(std::string_view text, std::string_view name) {
  size_t at = 0;
  while ((at = text.find(name, at)) != std::string_view::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      const char* value = text.data() + at + name.size();
      return std::strtoull(value, nullptr, 10) * 1024;
    }
    at += name.size();
  }
  return 0;
}

// CPU time the process has run, in nanoseconds (/proc/PID/schedstat's first field); 0 if gone.
uint64_t cpu_nanoseconds(pid_t pid) {
  std::string text = read_small_file("/proc/" + std::to_string(pid) + "/schedstat", 256);
  return std::strtoull(text.c_str(), nullptr, 10);
}

// RssAnon + RssShmem: the kernel's counters, never below the PSS of the same pages.
uint64_t resident_bound(pid_t pid) {
  std::string status = read_small_file("/proc/" + std::to_string(pid) + "/status");
  return kb_field(status, "RssAnon:") + kb_field(status, "RssShmem:");
}

}  // namespace

std::vector<pid_t> jail_processes(pid_t root, bool include_root, size_t limit) {
  std::vector<pid_t> found;
  std::unordered_set<pid_t> seen{root};
  if (include_root) found.push_back(root);
  std::vector<pid_t> pending{root};
  while (!pending.empty() && found.size() < limit) {
    pid_t pid = pending.back();
    pending.pop_back();
    // Each thread has its own children list (a child belongs to the thread that forked it).
    std::string base = "/proc/" + std::to_string(pid) + "/task/";
    if (DIR* dir = ::opendir(base.c_str())) {
      while (dirent* entry = ::readdir(dir)) {
        if (entry->d_name[0] == '.') continue;
        std::string children = read_small_file(base + entry->d_name + "/children", 65536);
        const char* p = children.c_str();
        char* end = nullptr;
        for (long child = std::strtol(p, &end, 10); end != p; child = std::strtol(p, &end, 10)) {
          p = end;
          auto id = static_cast<pid_t>(child);
          if (id > 0 && seen.insert(id).second && found.size() < limit) {
            found.push_back(id);
            pending.push_back(id);
          }
        }
      }
      ::closedir(dir);
    }
  }
  return found;
}

uint64_t counted_memory(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid);
  std::string rollup = read_small_file(dir + "/smaps_rollup");
  if (rollup.find("\nPss_Anon:") != std::string::npos)
    return kb_field(rollup, "Pss_Anon:") + kb_field(rollup, "Pss_Shmem:");
  return resident_bound(pid);
}

bool zero_sysv_ipc_limits() {
  // These files show and set the IPC namespace of the task that opens them: init's own.
  bool all = true;
  for (auto [path, value] :
       {std::pair{"/proc/sys/kernel/shmmni", "0"}, std::pair{"/proc/sys/kernel/shmall", "0"},
        std::pair{"/proc/sys/kernel/msgmni", "0"}, std::pair{"/proc/sys/kernel/sem", "0 0 0 0"}}) {
    int fd = ::open(path, O_WRONLY | O_CLOEXEC);
    bool ok = fd >= 0 &&
              ::write(fd, value, std::strlen(value)) == static_cast<ssize_t>(std::strlen(value));
    if (fd >= 0) ::close(fd);
    all = all && ok;
  }
  return all;
}

SessionMemory::Sample SessionMemory::sample() {
  Sample s;
  std::vector<pid_t> pids = jail_processes(root_, include_root_);
  uint64_t cpu = 0;
  for (pid_t pid : pids) {
    cpu += cpu_nanoseconds(pid);
    s.bound += resident_bound(pid);
  }
  // A process that exits takes its CPU time to its parent's cutime, so the sum may also drop:
  // any change, or a change in who is there, means something ran.
  s.busy = cpu != last_cpu_ns_ || pids.size() != last_count_;
  last_cpu_ns_ = cpu;
  last_count_ = pids.size();
  if (s.bound <= cap_) return s;
  for (pid_t pid : pids) s.exact += counted_memory(pid);
  s.over = s.exact > cap_;
  return s;
}

}  // namespace belljar
