#include "sandbox/layers/cgroup.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

#include "sandbox/os/setup_error.hpp"
#include "sandbox/os/small_file.hpp"

namespace belljar {

namespace {

bool write_text(const std::string& path, const std::string& text, int* err = nullptr) {
  FILE* f = std::fopen(path.c_str(), "we");
  if (!f) {
    if (err) *err = errno;
    return false;
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = (std::fflush(f) == 0) && ok;
  int saved = errno;
  std::fclose(f);
  if (!ok && err) *err = saved;
  return ok;
}

bool has_word(const std::string& text, std::string_view word) {
  for (auto w : words(text))
    if (w == word) return true;
  return false;
}

// "key value" files (memory.events, cpu.stat, memory.oom_control).
uint64_t keyed_value(const std::string& path, std::string_view key, bool* found = nullptr) {
  std::string text = read_small_file(path);
  auto fields = words(text);
  for (size_t i = 0; i + 1 < fields.size(); i += 2)
    if (fields[i] == key) {
      if (auto value = parse_unsigned(fields[i + 1])) {
        if (found) *found = true;
        return *value;
      }
    }
  if (found) *found = false;
  return 0;
}

bool single_value(const std::string& path, uint64_t& value) {
  std::string text = read_small_file(path, 64);
  auto fields = words(text);
  auto parsed = fields.empty() ? std::nullopt : parse_unsigned(fields.front());
  if (parsed) value = *parsed;
  return parsed.has_value();
}

struct Mount {
  std::string point, fstype, options;
};

std::vector<Mount> cgroup_mounts() {
  std::vector<Mount> mounts;
  std::string mountinfo = read_small_file("/proc/self/mountinfo", 4u << 20);
  for (auto line : lines(mountinfo)) {
    // id parent dev root point options [optional fields...] - fstype source super-options
    auto fields = words(line);
    size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash + 3 >= fields.size()) continue;
    std::string_view fstype = fields[dash + 1];
    if (fstype == "cgroup2" || fstype == "cgroup")
      mounts.push_back(
          {std::string(fields[4]), std::string(fstype), std::string(fields[dash + 3])});
  }
  return mounts;
}

// Our own cgroup in the hierarchy that has `controller` ("" for v2).
std::string own_path(const std::string& controller) {
  std::string cgroups = read_small_file("/proc/self/cgroup");
  for (auto line_view : lines(cgroups)) {
    std::string line(line_view);
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string names = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    bool matches = controller.empty()
                       ? (line.substr(0, a) == "0" && names.empty())
                       : ("," + names + ",").find("," + controller + ",") != std::string::npos;
    if (matches) return path;
  }
  return {};
}

bool probe_writable(const std::string& dir) {
  std::string probe = dir + "/belljar-probe-" + std::to_string(::getpid());
  if (::mkdir(probe.c_str(), 0755) != 0) return false;
  ::rmdir(probe.c_str());
  return true;
}

// Removes cgroups left by wardens that were killed before they could clean up (a supervisor
// killed with SIGKILL takes its warden along, and no one is left to rmdir). A cgroup goes when
// its warden is dead, or (the pid reused since) when it has no tasks and is over a minute old;
// a live session's cgroup always holds its init, and a new one is filled within milliseconds.
void sweep_stale(const std::string& parent) {
  DIR* dir = ::opendir(parent.c_str());
  if (!dir) return;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.rfind("belljar-", 0) != 0 || name.rfind("belljar-probe-", 0) == 0) continue;
    char* end = nullptr;
    long pid = std::strtol(name.c_str() + 8, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
    std::string path = parent + "/" + name;
    bool warden_dead = ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    struct stat st {};
    bool old_and_empty =
        ::stat(path.c_str(), &st) == 0 && ::time(nullptr) - st.st_ctime > 60 &&
        read_small_file(path + "/cgroup.procs").find_first_not_of(" \n") == std::string::npos;
    if (warden_dead || old_and_empty) ::rmdir(path.c_str());
  }
  ::closedir(dir);
}

}  // namespace

CgroupParents find_cgroup_parents() {
  CgroupParents parents;
  for (const auto& mount : cgroup_mounts()) {
    if (mount.fstype == "cgroup2") {
      if (!parents.v2.empty()) continue;
      std::string own = own_path("");
      if (own.empty()) continue;
      std::string self_dir = mount.point + (own == "/" ? "" : own);
      // Children of our own cgroup can get controllers only if it is the root (a non-root
      // cgroup with processes cannot enable them); otherwise try our parent (a sibling cgroup).
      std::vector<std::string> candidates = {self_dir};
      if (own != "/") candidates.push_back(self_dir.substr(0, self_dir.rfind('/')));
      std::string why;
      for (const auto& dir : candidates) {
        std::string available = read_small_file(dir + "/cgroup.controllers");
        std::string enabled = read_small_file(dir + "/cgroup.subtree_control");
        if (!has_word(available, "memory") || !has_word(available, "pids")) {
          why = "cgroup v2 at " + dir + " has no memory/pids controllers (available: " +
                (available.empty() ? std::string("none")
                                   : available.substr(0, available.find('\n'))) +
                ")";
          continue;
        }
        if (!has_word(enabled, "memory") || !has_word(enabled, "pids")) {
          if (dir != mount.point || !write_text(dir + "/cgroup.subtree_control", "+memory +pids")) {
            why = "cgroup v2 at " + dir + " does not delegate memory and pids to its children";
            continue;
          }
        }
        if (!probe_writable(dir)) {
          why = "cgroup v2 at " + dir + " is not writable by this user";
          continue;
        }
        parents.v2 = dir;
        break;
      }
      if (parents.v2.empty() && !why.empty()) parents.notes.push_back(why);
    }
  }
  if (!parents.v2.empty()) return parents;

  for (const char* controller : {"memory", "pids", "cpuacct"}) {
    std::string* slot = std::string(controller) == "memory" ? &parents.v1_memory
                        : std::string(controller) == "pids" ? &parents.v1_pids
                                                            : &parents.v1_cpuacct;
    bool mounted = false;
    for (const auto& mount : cgroup_mounts()) {
      if (mount.fstype != "cgroup" ||
          ("," + mount.options + ",").find(std::string(",") + controller + ",") ==
              std::string::npos)
        continue;
      mounted = true;
      std::string own = own_path(controller);
      std::string dir = mount.point + (own == "/" ? "" : own);
      if (probe_writable(dir))
        *slot = dir;
      else
        parents.notes.push_back(std::string("cgroup v1 ") + controller + " at " + dir +
                                " is not writable by this user");
      break;
    }
    if (!mounted && std::string(controller) != "cpuacct")
      parents.notes.push_back(std::string("no cgroup v1 ") + controller + " hierarchy is mounted");
  }
  return parents;
}

SandboxCgroup SandboxCgroup::create(const CgroupParents& parents, const std::string& name,
                                    uint64_t memory_bytes, uint64_t pids) {
  SandboxCgroup cg;
  auto make = [&](const std::string& parent) -> std::string {
    sweep_stale(parent);
    std::string dir = parent + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("mkdir(" + dir + ")");
    return dir;
  };
  auto set = [&](const std::string& file, const std::string& value, bool optional = false) {
    int err = 0;
    if (!write_text(file, value, &err) && !(optional && (err == ENOENT || err == EINVAL)))
      throw_errno("write(" + file + ", " + value + ")", err);
  };
  try {
    if (!parents.v2.empty()) {
      cg.paths_.v2 = make(parents.v2);
      set(cg.paths_.v2 + "/memory.max", std::to_string(memory_bytes));
      set(cg.paths_.v2 + "/memory.swap.max", "0", true);
      set(cg.paths_.v2 + "/pids.max", std::to_string(pids));
      return cg;
    }
    if (!parents.v1_memory.empty()) {
      cg.paths_.memory = make(parents.v1_memory);
      set(cg.paths_.memory + "/memory.limit_in_bytes", std::to_string(memory_bytes));
      // With swap accounting on, also cap memory+swap, or the session could swap past its cap.
      set(cg.paths_.memory + "/memory.memsw.limit_in_bytes", std::to_string(memory_bytes), true);
    }
    if (!parents.v1_pids.empty()) {
      cg.paths_.pids = make(parents.v1_pids);
      set(cg.paths_.pids + "/pids.max", std::to_string(pids));
    }
    if (!parents.v1_cpuacct.empty()) cg.paths_.cpuacct = make(parents.v1_cpuacct);
  } catch (...) {
    cg.remove();
    throw;
  }
  return cg;
}

void SandboxCgroup::attach(pid_t pid) const {
  for (const auto* dir : {&paths_.v2, &paths_.memory, &paths_.pids, &paths_.cpuacct}) {
    if (dir->empty()) continue;
    int err = 0;
    if (!write_text(*dir + "/cgroup.procs", std::to_string(pid), &err))
      throw_errno("write(" + *dir + "/cgroup.procs, " + std::to_string(pid) + ")", err);
  }
}

double SandboxCgroup::cpu_seconds() const {
  bool found = false;
  if (!paths_.v2.empty()) {
    uint64_t usec = keyed_value(paths_.v2 + "/cpu.stat", "usage_usec", &found);
    return found ? usec / 1e6 : -1;
  }
  uint64_t ns = 0;
  if (!paths_.cpuacct.empty() && single_value(paths_.cpuacct + "/cpuacct.usage", ns))
    return ns / 1e9;
  return -1;
}

uint64_t SandboxCgroup::peak_memory_bytes() const {
  uint64_t value = 0;
  if (!paths_.v2.empty() && single_value(paths_.v2 + "/memory.peak", value)) return value;
  if (!paths_.memory.empty() && single_value(paths_.memory + "/memory.max_usage_in_bytes", value))
    return value;
  return 0;
}

uint64_t SandboxCgroup::oom_kills() const {
  if (!paths_.v2.empty()) return keyed_value(paths_.v2 + "/memory.events", "oom_kill");
  if (!paths_.memory.empty()) return keyed_value(paths_.memory + "/memory.oom_control", "oom_kill");
  return 0;
}

bool SandboxCgroup::set_memory_limit(uint64_t bytes, std::string* why) const {
  int err = 0;
  std::string value = std::to_string(bytes);
  if (!paths_.v2.empty()) {
    if (write_text(paths_.v2 + "/memory.max", value, &err)) return true;
    if (why) *why = "memory.max: " + std::string(std::strerror(err));
    return false;
  }
  if (paths_.memory.empty()) {
    if (why) *why = "this sandbox has no memory cgroup (only the session's rlimit)";
    return false;
  }
  // v1 keeps memsw >= memory: lower memory first, raise memsw first.
  std::string memory = paths_.memory + "/memory.limit_in_bytes",
              memsw = paths_.memory + "/memory.memsw.limit_in_bytes";
  int ignored = 0;
  bool ok = write_text(memory, value, &err);
  if (!ok) {
    write_text(memsw, value, &ignored);
    ok = write_text(memory, value, &err);
  }
  write_text(memsw, value, &ignored);
  if (!ok && why)
    *why = err == EBUSY ? "the session already uses more than that"
                        : "memory.limit_in_bytes: " + std::string(std::strerror(err));
  return ok;
}

void SandboxCgroup::kill_all() const {
  if (!paths_.v2.empty() && write_text(paths_.v2 + "/cgroup.kill", "1")) return;
  for (const auto* dir : {&paths_.v2, &paths_.pids, &paths_.memory, &paths_.cpuacct}) {
    if (dir->empty()) continue;
    std::string procs = read_small_file(*dir + "/cgroup.procs", 1u << 20);
    for (auto word : words(procs))
      if (auto pid = parse_unsigned(word); pid && *pid > 0 && *pid < 0x3fffffff)
        ::kill(static_cast<pid_t>(*pid), SIGKILL);
  }
}

bool SandboxCgroup::remove() const {
  bool gone = true;
  for (const auto* dir : {&paths_.v2, &paths_.memory, &paths_.pids, &paths_.cpuacct})
    if (!dir->empty() && ::rmdir(dir->c_str()) != 0 && errno != ENOENT) gone = false;
  return gone;
}

bool SandboxCgroup::remove_after_kill() const {
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (remove()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return remove();
}

std::string SandboxCgroup::describe() const {
  if (!paths_.v2.empty()) return "cgroup v2 " + paths_.v2 + " (memory.max, pids.max)";
  std::string text;
  if (!paths_.memory.empty()) text += "cgroup v1 " + paths_.memory + " (memory.limit_in_bytes)";
  if (!paths_.pids.empty())
    text += std::string(text.empty() ? "" : ", ") + "cgroup v1 " + paths_.pids + " (pids.max)";
  if (!paths_.cpuacct.empty())
    text += std::string(text.empty() ? "" : ", ") + "cgroup v1 " + paths_.cpuacct + " (cpuacct)";
  return text;
}

}  // namespace belljar
