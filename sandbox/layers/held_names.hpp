#pragma once
// Names in the workspace that a protected link leads through: held by the broker's judge
// (workspace_judge.hpp) as closed as the protected name itself.
//
// A host tool that opens `.bashrc`, `.git/hooks/pre-commit` or `.ssh/config` follows links. When
// such a name is a link, what the host runs is decided by every link on its way and by the
// name where the way ends: `.bashrc -> dotfiles/bashrc -> ../real/bashrc`. A guard mounted on the
// existing end holds that file alone; the middle link could be renamed and replaced (the outside
// pass's B1), an end that did not exist yet could be made by its ordinary name (B3), and in
// degraded mode, where nothing is mounted, the end could be written by its own name. So the
// survey (workspace_guard.hpp) follows each link whose name the rule protects or hides, and each
// link inside a protected or hidden folder (`.git/hooks/pre-commit -> ../../hooks/pre-commit`,
// git's common way to share hooks), the way the host's kernel would, and holds:
//   - every link it passes through inside the workspace (its own name: no change to it);
//   - the name where the way ends inside the workspace, whether it exists or not, and
//     everything below it;
//   - the folders above those names: no link may stand there (made, or moved in), or the way
//     would lead elsewhere.
// A way that ends at the workspace itself holds all of it (fails closed). Held names are the
// host's view, refreshed by every survey (before each cell and on a timer): a link the host makes
// while a cell runs is held from the next survey on; what the sandbox wrote to its end before
// then is what the host's user chose to link to.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace belljar {

// The links a path passes through on the host and where it ends, as the kernel would resolve
// it (absolute host paths). A component that does not exist ends the walk: the rest is taken
// as written (".." drops a component). More than kMaxLinkHops links (a loop): `loops`, no end.
struct LinkWay {
  std::vector<std::string> links;
  std::optional<std::string> end;
  bool loops = false;
};
inline constexpr int kMaxLinkHops = 40;  // the kernel's own bound (ELOOP)
LinkWay follow_link_way(const std::string& path);

struct HeldName {
  std::vector<std::string> path;  // components below the workspace (empty: all of it)
  std::string link;               // the protected name whose way holds it
};

inline constexpr size_t kMaxHeldNames = 4096;

class HeldNames {
 public:
  // Adds `path` (a host path) when it lies in `workspace` or is it; false past kMaxHeldNames.
  bool hold(const std::string& workspace, const std::string& path, const std::string& link);

  // The held name at or above `relative`, if any: what closes it.
  const HeldName* holding(const std::vector<std::string>& relative) const;
  // Each held name strictly below the folder `relative`: `relative` is on its way.
  std::vector<const HeldName*> beyond(const std::vector<std::string>& relative) const;

  size_t size() const { return names_.size(); }
  const std::vector<HeldName>& names() const { return names_; }

 private:
  std::vector<HeldName> names_;
};

}  // namespace belljar
