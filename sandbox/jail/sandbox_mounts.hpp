#pragma once
// The sandbox's mount points as the broker weighs them (workspace_judge.hpp): every mount point
// of the sandbox's mount namespace, and every folder above one, as components from the
// sandbox's root, read from /proc/PID/mountinfo of a process in the sandbox.
//
// Threat: the broker runs in the host's mount namespace, where the sandbox's mount points are
// not mount points: the kernel lets its renameat and unlinkat move or remove a folder that, in
// the sandbox, is a guard (a read-only or masked mount over a dot-file, an --ro part), the
// workspace's own mount, or a folder above either, and the mount goes along with it. The
// workspace then lies elsewhere than the rule and the survey say (a venv's site-packages under a
// renamed /tmp/X), or a guarded name is free to be made again. The judge refuses those changes
// by this list (EBUSY, what the kernel answers in the sandbox's own namespace). The list is read
// once per change of the sandbox's mounts (the warden says so around each survey, which mounts
// new guards), not per call; a list that cannot be read is no list, and the judge refuses.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace belljar {

class SandboxMounts {
 public:
  SandboxMounts() = default;
  // From mount points given as components from the sandbox's root.
  explicit SandboxMounts(const std::vector<std::vector<std::string>>& points);

  // The mount points /proc/PID/mountinfo's text names (its fifth field, unescaped), as
  // components; nothing when a line is not mountinfo's (the caller then refuses).
  static std::optional<std::vector<std::vector<std::string>>> parse(std::string_view mountinfo);

  // Reads /proc/`pid`/mountinfo, the list then carrying `stamp` (MountChanges::stamp): false
  // (the list left empty, and stale) when it cannot be read or parsed.
  bool read(pid_t pid, std::optional<uint64_t> stamp);
  // Whether the list was read under `stamp`, which is still the current one.
  bool current(std::optional<uint64_t> stamp) const { return stamp && stamp_ == stamp; }

  // Whether `path` (components from the root; none: the root) is a mount point or a folder
  // above one.
  bool at_or_above(const std::vector<std::string>& path) const;

 private:
  std::unordered_set<std::string> held_;  // each point and each folder above it, "/"-joined
  std::optional<uint64_t> stamp_;
};

// When the sandbox's mounts may change: the warden's word around each survey, which mounts new
// guards (any thread), and the stamp a list read by the broker carries (its thread). While a
// survey may be mounting there is no stamp: the list is read again for each move weighed.
class MountChanges {
 public:
  void surveying() { surveying_ = true; }
  void surveyed() {
    ++generation_;
    surveying_ = false;
  }
  // Read in this order, so a mount made before the call is in a list read under the stamp: a
  // survey under way gives none, one finished since has moved the generation on.
  std::optional<uint64_t> stamp() const {
    if (surveying_.load()) return std::nullopt;
    return generation_.load();
  }

 private:
  std::atomic<bool> surveying_{false};
  std::atomic<uint64_t> generation_{0};
};

}  // namespace belljar
