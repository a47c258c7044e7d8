#pragma once
// The workspace broker's judge (workspace_broker.hpp): given a name the broker resolved in the
// sandbox's root (sandbox_paths.hpp, a WalkedPath: a descriptor of the folder the name lives in
// and its components from the root) and the change asked for, it says whether the change may be
// made, or the errno the cell gets, and records the refusal. It decides, it changes nothing: the
// broker's handlers make the change through the same descriptors afterwards.
//
// Threat: the cell names what it wants changed, and everything a host tool later runs or reads
// lives in a name — a dot-file, an environment's start-up code, a home's bin, a module of the
// host's Python by name, a secret, a protected path. The judge answers from the rule on the
// name's components (workspace_rule.hpp) and from what is on disk around it, looked at through
// the walk's own descriptors, never by path text: an environment on the way (marked by the walk),
// a home's bin beside a shell's start-up file, a name that would complete an environment's shape,
// a folder that carries a closed name away when renamed (looked at to its last entry: what cannot
// be read is refused), a link leading out of the workspace, a mode that would hide a folder from
// the quota's survey or set an id bit. Outside the workspace a change is allowed only below a
// writable root, and the refusal there is the kernel's own (EROFS or EACCES).
//
// The broker makes its changes in the host's mount namespace, where the sandbox's mounts are
// not busy: its rename would carry a guard, an --ro part or the workspace's own mount away with
// the folder, and its unlink would take a guarded name away. So a rename (either end, and with
// RENAME_EXCHANGE both) or a removal (unlink, rmdir, a file moved to the morgue, a name renamed
// over) of a mount point of the sandbox, or of a folder above one, is refused with EBUSY, as the
// kernel answers in the sandbox's own namespace, and recorded: the workspace's own path, the
// object's own STATX_ATTR_MOUNT_ROOT (seen through the sandbox's root), and the sandbox's mount
// list (sandbox_mounts.hpp) say which. The other refusals come first: what was refused for its
// name keeps its errno. In degraded mode, where nothing is mounted, what strict's guards hold
// is held by name: a change reached through a link whose own name the rule closes is refused
// as a change of that name, and the --ro parts inside the workspace are protected names
// (read_only_patterns, workspace_broker.hpp). In both modes the links inside the workspace on
// the way to an --ro path, as given, are protected names (jail_plan.hpp,
// read_only_link_patterns): no mount holds a link's own name.
//
// Two more closures, in both modes. The names on a protected link's way (held_names.hpp: every
// link it passes through, and where it ends, whether that exists or not, with all below it) are
// closed as the protected name is, a folder on that way is not moved, and no link may be made
// on, or moved onto, a folder on it: the survey finds them on the host, and the broker holds the
// last survey's. They are weighed last, after the mounts: what a guard (a read-only mount)
// already holds keeps the kernel's answer (EROFS, EBUSY). A regular file
// with more than one name (a hard link the host made: the sandbox can make none) is not written,
// re-moded, re-owned or re-timed through any of them: its other name may be a protected file's
// (`ln W/.bashrc W/notes/bashrc.bak`), and which it is the broker cannot know without walking
// the workspace.
#include <sys/stat.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/jail/sandbox_mounts.hpp"
#include "sandbox/jail/sandbox_paths.hpp"
#include "sandbox/layers/held_names.hpp"
#include "sandbox/layers/workspace_rule.hpp"

namespace belljar {

// What a brokered call would do to a name, as the judge weighs it.
enum class Change { create, make_folder, write, remove, rename, mode, owner, times, link };

// The word a refusal record uses for `change` (making a folder is a "create").
const char* change_name(Change change);

struct BrokerRefusal {
  std::string path;    // relative to the workspace
  std::string change;  // "create", "write", "remove", "rename", "mode", "owner", "times", "link"
  std::string reason;
};

// What the kernel would have said to a change outside the writable places: EROFS on a
// read-only mount (most of the sandbox's root), EACCES elsewhere. `dir`: the folder's descriptor.
int outside_roots(int dir);

class WorkspaceJudge {
 public:
  // Told of each refusal before the call is answered (the broker says each path once).
  using Refuse = std::function<void(BrokerRefusal)>;
  // The sandbox's mount list as it is now, asked for only when a move or removal is weighed;
  // null when it could not be read (every move and removal is then refused).
  using Mounts = std::function<const SandboxMounts*()>;

  // `workspace` and `roots` as components from the sandbox's root; `root`: the sandbox's root
  // folder (a link's target is walked from it). No `mounts`: only the workspace's own path and
  // the objects' own mount roots are weighed. `links_by_name` (degraded mode, where no guard is
  // mounted over a link's target): a change reached through a link in the workspace whose own
  // name the rule closes (.bashrc -> dotfiles/bashrc) is refused as a change of that name.
  // `held`: the names on protected links' ways, closed too (none: nothing held).
  WorkspaceJudge(const WorkspaceRule& rule, const std::vector<std::string>& workspace,
                 const std::vector<std::vector<std::string>>& roots, int root, Refuse refuse,
                 Mounts mounts = {}, bool links_by_name = false, const HeldNames* held = nullptr)
      : rule_(rule),
        workspace_(workspace),
        roots_(roots),
        root_(root),
        refuse_(std::move(refuse)),
        mounts_(std::move(mounts)),
        links_by_name_(links_by_name),
        held_(held) {}

  // The target's components below the workspace, if it is in it.
  std::optional<std::vector<std::string>> in_workspace(const WalkedPath& at) const;

  // 0 when `change` may be made to the name `at`; the errno for the caller otherwise (EACCES;
  // EPERM for a mode, an owner or times; outside the workspace the kernel's own; EBUSY for the
  // removal of a mount point or a folder above one), recorded.
  int decide(const WalkedPath& at, Change change);

  // A rename of `from` to `to` with renameat2's `flags`: both names, everything below a folder
  // that moves (where it stands and where it goes), a folder that would complete an
  // environment's shape where it lands, and a link that would land on a held name's way; with
  // RENAME_EXCHANGE, each way. Last, neither end may be a mount point or a folder above one
  // (EBUSY).
  int decide_rename(const WalkedPath& from, const WalkedPath& to, unsigned flags);

  // What the kernel would refuse by two objects' kinds when `moved` replaces `replaced` (a
  // folder over a file: ENOTDIR; a file over a folder: EISDIR), decided before anything moves: a
  // target buried first would let a folder take a file's place. 0 when the kinds agree.
  static int replacement_refusal(const struct stat& moved, const struct stat& replaced);

  // A symlink whose text is `target`, made at `at` (judged first as a new name, Change::create):
  // in the workspace it may only lead to an ordinary place in the workspace, resolved from where
  // it stands (a host tool writes through it), and may not stand on a held name's way;
  // elsewhere its text is not looked at.
  int decide_link(const WalkedPath& at, const std::string& target);

  // A mode set on `at` (a file or folder `st` describes): no set-id bit, and no folder in the
  // workspace its owner could not read and search (the quota's survey counts every folder).
  int decide_mode(const WalkedPath& at, const struct stat& st, mode_t mode);

 private:
  int refuse(const std::vector<std::string>& relative, Change change, const std::string& why);
  int decide_name(const WalkedPath& at, Change change);
  int decide_mount(const WalkedPath& at, Change change);
  int decide_links(const WalkedPath& at, Change change);
  int decide_subtree(const WalkedPath& from, const WalkedPath& to);
  int decide_environment_by_rename(const WalkedPath& from, const WalkedPath& to);
  int decide_held(const WalkedPath& at, Change change, bool moved = false);
  int decide_way(const WalkedPath& from, const WalkedPath& to);
  std::optional<std::string> held_reason(const std::vector<std::string>& relative) const;
  static bool has_other_names(const WalkedPath& at);
  static bool on_read_only_mount(const WalkedPath& at);
  bool makes_an_environment(const WalkedPath& at) const;
  bool in_a_homes_bin(const WalkedPath& at, const std::vector<std::string>& relative) const;
  std::optional<std::string> host_run_folder(const WalkedPath& at) const;

  const WorkspaceRule& rule_;
  const std::vector<std::string>& workspace_;
  const std::vector<std::vector<std::string>>& roots_;
  int root_;
  Refuse refuse_;
  Mounts mounts_;
  bool links_by_name_;
  const HeldNames* held_;
};

}  // namespace belljar
