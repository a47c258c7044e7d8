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
// survey (workspace_guard.hpp) follows, the way the host's kernel would (ProtectedLinks below):
// each link whose path the rule closes by a dot-name or a pattern, each link inside such a
// folder (`.git/hooks/pre-commit -> ../../hooks/pre-commit`, git's common way to share hooks)
// or inside a folder a way ends at, and the paths git reads from a `.git` (gitdir, hooksPath,
// include.path); and it holds:
//   - every link it passes through inside the workspace (its own name: no change to it);
//   - the name where the way ends inside the workspace, whether it exists or not, and
//     everything below it;
//   - the folders above those names, and those the way left by "..": no link may stand there
//     (made, or moved in), or the way would lead elsewhere.
// Folders are known by their identity (device and inode), so a bind mount or another spelling
// of the workspace leads to the same held names.
// A way that ends at the workspace itself holds all of it (fails closed). Held names are the
// host's view, refreshed by every survey (before each cell and on a timer): a link the host makes
// while a cell runs is held from the next survey on; what the sandbox wrote to its end before
// then is what the host's user chose to link to.
#include <sys/types.h>

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sandbox/layers/workspace_rule.hpp"

namespace belljar {

// The links a path passes through on the host and where it ends, as the kernel would resolve
// it (absolute host paths). A component that does not exist ends the walk: the rest is taken
// as written. A folder the way enters and then leaves by ".." is `left`: the sandbox must not
// turn it into a link (`.bashrc -> dir/../real`: a link at dir would send ".." elsewhere). More
// than kMaxLinkHops links (a loop): `loops`, no end.
// A way through /proc (or /dev/fd, a link into it), or a link that changed while it was read,
// leads where nobody can say for the host tool that follows it (its own cwd, its own root):
// `unknown`, and the survey holds the whole workspace for it (fails closed).
struct LinkWay {
  std::vector<std::string> links;
  std::vector<std::string> left;
  std::optional<std::string> end;
  bool loops = false;
  bool unknown = false;
};
inline constexpr int kMaxLinkHops = 40;  // the kernel's own bound (ELOOP)
LinkWay follow_link_way(const std::string& path);

using NameParts = std::vector<std::string>;

// The values git reads as paths in a config file's text: core.hooksPath (where hooks run from),
// init.templateDir (whose hooks/ new repositories get) and include.path / includeIf.*.path (more
// config). The commands a config runs by a path (core.fsmonitor, aliases, diff and merge
// tools...) are not followed: that is the user's own project code, as `make` would run it.
struct GitConfigPaths {
  std::vector<std::string> hooks, templates, includes;
};
GitConfigPaths git_config_paths(const std::string& text);

struct HeldName {
  NameParts path;    // components below the workspace (empty: all of it)
  std::string link;  // the protected name whose way holds it
};

inline constexpr size_t kMaxHeldNames = 16384;

class HeldNames {
 public:
  // `relative` held (closed with all below it), or kept a folder on a way only (no link there,
  // not moved); false past kMaxHeldNames.
  bool hold(NameParts relative, const std::string& link);
  bool keep_way(NameParts relative, const std::string& link);

  // The held name at or above `relative`, if any: what closes it. One lookup per component:
  // the broker asks it of every name it judges.
  const HeldName* holding(const NameParts& relative) const;
  // One of the held names strictly below the folder `relative`, or the ways kept at or below
  // it (`relative` is on its way), if any; beyond() lists them all.
  const HeldName* first_beyond(const NameParts& relative) const;
  std::vector<const HeldName*> beyond(const NameParts& relative) const;

  size_t size() const { return names_.size() + ways_.size(); }
  const std::deque<HeldName>& names() const { return names_; }

 private:
  bool add(std::deque<HeldName>& list, NameParts relative, const std::string& link, bool is_way);

  std::deque<HeldName> names_, ways_;  // a deque: the indexes below point into it
  std::map<NameParts, const HeldName*> held_at_, way_at_;
  // Each folder some held name lies strictly below, or some kept way at or below: one of them.
  std::map<NameParts, const HeldName*> through_;
};

// What a survey finds of protected links, in two steps. While it walks, it says which folders
// of the workspace it saw (each by its identity: a bind mount or another spelling of a folder is
// the same folder) and which links a host tool would follow from a protected name: every link
// whose name the rule closes (a dot-name anywhere on its path, a --protect or secret pattern),
// every link below such a folder, and the paths git follows from a `.git` (a `.git` file's
// gitdir, a config's core.hooksPath and include paths). Then resolve() follows each one's way,
// holds what it finds, and scans each folder a way ends at for links of its own, recursively.
class ProtectedLinks {
 public:
  // `closed`: the broker's rule; a name it closes is not held again (none: every name is).
  explicit ProtectedLinks(std::string workspace, const WorkspaceRule* closed = nullptr)
      : workspace_(std::move(workspace)), closed_(closed) {}

  void folder(dev_t dev, ino_t ino, NameParts relative);
  // A link at `relative`; `guard`: what the end gets (a pattern's kind), if anything.
  void link(const NameParts& relative, std::optional<int> guard, const std::string& reason);
  // A path (absolute, or relative to `base`, a host folder) a host tool follows from `from`.
  void pointer(const std::string& base, const std::string& text, const NameParts& from);
  // The `.git` at `relative` (a folder or a gitdir file): the pointers git follows from it
  // (gitdir, commondir, the config's hooksPath and include paths).
  void git(const NameParts& relative);
  // A bare repository (holds_git_repository's shape) at `relative`: the same, itself its git dir.
  void bare_repository(const NameParts& relative);
  // The user's own git config at `relative` (.gitconfig, .config/git/config at the top).
  void git_config(const NameParts& relative);
  // The guarded folder at `relative`: every link below it.
  void inside(const NameParts& relative, std::optional<int> guard, const std::string& reason);

  // An end to guard (strict mode mounts it, as the link that leads there asked).
  struct End {
    NameParts relative;
    bool directory;
    int guard;
    std::string reason;
  };
  // Follows every way; false when the held names pass their bound.
  bool resolve(HeldNames& held, std::vector<End>& ends);

 private:
  struct Pending {
    std::string path;  // absolute host path to follow
    std::string link;  // the protected name, for the refusal's text
    std::optional<int> guard;
    std::string reason;
  };
  std::optional<NameParts> relative_of(const std::string& path) const;
  void repository(const std::string& git_dir, const std::string& worktree, const NameParts& from);
  void config_pointers(std::vector<std::string> configs, const std::string& worktree,
                       const NameParts& from);
  std::string expand_home(const std::string& path) const;
  // The links below `folder` (its depth in the workspace: `depth`), each followed as `from`.
  void links_in(const std::string& folder, const Pending& from, size_t depth);
  std::string host_path(const NameParts& relative) const;

  // Whether holding `relative` adds anything to what the rule closes.
  bool worth_holding(const NameParts& relative) const {
    return !closed_ || relative.empty() || !closed_->closed(relative);
  }

  std::string workspace_;
  const WorkspaceRule* closed_;
  std::map<std::pair<dev_t, ino_t>, NameParts> folders_;
  std::vector<Pending> pending_;
  std::set<std::pair<dev_t, ino_t>> scanned_;  // ends already scanned for links
  mutable std::optional<std::string> home_;    // "~": the workspace owner's home (expand_home)
  // Every repository found (its worktree, the name it was found by), and the relative
  // hooksPaths of the user's own config, which name a folder in each.
  std::vector<std::pair<std::string, std::string>> worktrees_, global_hooks_;
};

// The regular files `now` holds that `before` did not (a held folder's files among them), open
// for writing by anyone: a read lease is refused while a writer exists (leases need the file's
// owner, or CAP_LEASE: the warden is one or has it). What the sandbox opened before the host
// made a link to it writes on whatever the survey holds. At most kMaxWriterChecks files are
// looked at; past that, `too_many` (fails closed).
inline constexpr size_t kMaxWriterChecks = 10000;
struct OpenWriters {
  std::vector<std::string> paths;  // relative to the workspace
  bool too_many = false;
};
OpenWriters newly_held_writers(const HeldNames& before, const HeldNames& now,
                               const std::string& workspace);

}  // namespace belljar
