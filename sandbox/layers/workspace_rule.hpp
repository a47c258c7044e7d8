#pragma once
// The workspace's one rule, decided by shape before a change happens (the broker,
// sandbox/jail/workspace_broker.hpp, asks it for every name the sandbox would make, change,
// rename or remove): the sandbox may change ordinary files and folders; it may not touch a path
// with a component that begins with "." (every host tool's configuration lives in dot-files and
// dot-folders: git, shells, Python's user site, IPython and Jupyter start-up, kernelspecs,
// autostart, ~/.local/bin), anything inside a Python environment (recognised by its shape, one
// table below: a venv, a conda environment, an interpreter's prefix; site-packages anywhere),
// nor what a --protect pattern names, nor a secret's name (a --hide pattern or a default one:
// *.pem, id_rsa*, jupyter/runtime; the survey would mask it, and 2049 top-level folders holding
// one made every later start refuse), nor a name HEAD (it makes a folder a git repository the
// host's git finds from below and obeys), nor the morgue (kMorgueName), whatever --writable
// says. An environment's start-up code (.pth files, sitecustomize, conda's activate.d) runs in
// the host's next interpreter or shell there: a conda folder without pyvenv.cfg was the red
// team's way in.
// --writable PATTERN opens a path and everything beneath it (e.g. .cache/myproject), and the
// plain folders above it may be made.
//
// The rule reads components, never the disk (holds_python_environment() alone looks at a
// folder, for the broker, which asks it of every folder it walks): the broker resolves every
// symlink itself, so the components it passes are where the change really lands, whatever the
// tree's shape. Patterns (workspace_guard.hpp's grammar) are split once, here: the broker asks on
// every create.
#include <optional>
#include <string>
#include <vector>

namespace belljar {

enum class NameChange { make_folder, other };

// What removing a name in the workspace does (unlink, or a rename over an existing file), in
// strict mode, where the broker holds the morgue (workspace_guard.hpp, kMorgueName). The quota's
// survey walks names: a file whose last name goes while another open file description of it
// remains (a writer, a reader, a descriptor in flight in a unix socket, a shared mapping) would
// hold bytes no survey counts (the outside attack on the third pass's fix: 200 MiB written
// after the unlink under a 32M quota). The broker asks the kernel with a write lease
// (F_SETLEASE F_WRLCK on a descriptor of its own), which it grants only when no other open file
// description exists; anything but a grant fails closed into the morgue, where the survey still
// counts the file until nobody holds it (each survey retries the lease) or the kernel ends.
enum class Removal { remove, morgue };
struct RemovalCase {
  const char* what;  // as docs/security.md shows it
  Removal removal;
  const char* reason;
};
// The one table, in the order removal_of() decides.
const std::vector<RemovalCase>& removal_cases();
// Whether removing this name may leave bytes without a name: a regular file's last name.
bool needs_lease(unsigned mode, unsigned long links);
// The decision for an object of `mode` with `links` names; `lease` is the errno of the broker's
// F_SETLEASE F_WRLCK (0: granted), asked only when needs_lease().
Removal removal_of(unsigned mode, unsigned long links, int lease);

// What makes a path part of a Python environment: the one table, with the reason for each
// shape. Everything below an environment's root, or below a closed component, is closed.
struct EnvironmentShape {
  const char* shape;  // as docs/security.md shows it
  bool on_disk;       // a folder's content (the broker looks); else the path's components
  const char* reason;
};
const std::vector<EnvironmentShape>& python_environment_shapes();

// Whether the folder `dir` (a descriptor) is an environment's root by one of the shapes on
// disk: it holds pyvenv.cfg, or a conda-meta folder, or bin/python* beside lib/python3.*.
bool holds_python_environment(int dir);

// Whether making `name` in the folder `parent` (whose own name is `parent_name`) would make
// that folder, or the one above it (`above`, a descriptor; -1 when there is none to look at),
// an environment's root by a shape on disk: pyvenv.cfg or conda-meta anywhere; bin/python*
// where the folder above holds lib/python3.*/, and lib/python3.* where it holds bin/python*.
// The broker refuses such a name: a session that made one closed its folder — the
// workspace's top, with one `pyvenv.cfg` (the outside attack on round three) — to every later
// session until the host's user removed it.
bool completes_environment(const std::string& parent_name, const std::string& name, int above);
// The same for a folder moved into place: `from_name` in `from_dir`, renamed to `to_name` in
// `to_dir` — a folder of python3.* folders becoming a `lib` beside bin/python*, or of python*
// becoming a `bin` beside lib/python3.* (the outside attack on round three renamed one in).
bool folder_completes_environment(int from_dir, const std::string& from_name,
                                  const std::string& to_name, int to_dir);

// Whether the folder `dir` (a descriptor) is, or may become, a git repository: it holds an
// entry named HEAD, of any kind (a bare repository, a fixture missing refs/ that git drops from
// clones: the host's `git push` or `git branch` there runs its hooks and obeys its config; a
// worktree's is `.git`, closed by its dot). The sandbox can make no HEAD: one there is the host's.
bool holds_git_repository(int dir);
// What the broker marks on every walk: a folder whose content a host tool runs by its shape, a
// Python environment's root or a git repository.
bool holds_host_run_folder(int dir);

// Whether the folder `dir` (a descriptor) is a home by its shape: it holds a login shell's
// start-up file (.profile, .bash_profile, .bash_login, .zprofile, .zlogin, .bashrc, .zshrc,
// .cshrc, .tcshrc), so a `bin` in it is first on that shell's PATH (Debian's ~/.profile puts
// ~/bin there). The broker asks it of the folder holding any `bin` it is asked to change below:
// a workspace that is, or holds, a home (the outside attack on round three planted bin/git in a
// home below the workspace, and in another user's home as the workspace).
bool holds_shell_start_up(int dir);

// Whether an entry named `name` in a folder (below `parent`, its name) may make that folder,
// or the one above, an environment's root: what the broker forgets its walks after.
bool environment_marker(const std::string& parent, const std::string& name);

class WorkspaceRule {
 public:
  WorkspaceRule() = default;
  // `protect`: read-only patterns; `writable`: patterns opened despite the rule; `hide`: the
  // secrets' patterns (defaults and --hide), closed whatever --writable says: the survey masks
  // what they name from the sandbox, and each top-level folder holding one is a guard the next
  // start must mount (more than kMaxGuards of them and it refuses: what a session may not make).
  WorkspaceRule(const std::vector<std::string>& protect, const std::vector<std::string>& writable,
                const std::vector<std::string>& hide = {});

  // Why the change of `relative` (components below the workspace root; empty: the root
  // itself) is refused, or nothing when it is allowed.
  std::optional<std::string> refusal(const std::vector<std::string>& relative,
                                     NameChange change) const;

  // Whether the rule closes `relative`: the broker asks it of every entry below a folder it is
  // asked to rename, so no protected path is carried away with its parent.
  bool closed(const std::vector<std::string>& relative) const {
    return refusal(relative, NameChange::other).has_value();
  }

 private:
  struct Pattern {
    bool anchored = false;           // a leading "/": at the workspace's top only
    std::vector<std::string> parts;  // fnmatch globs, one per component
    // Whether the first `length` components of `path` end with these parts.
    bool matches(const std::vector<std::string>& path, size_t length) const;
    // Whether `path` is a folder some path this pattern matches lies below.
    bool below(const std::vector<std::string>& path) const;
  };
  static std::vector<Pattern> compiled(const std::vector<std::string>& patterns);

  std::vector<Pattern> protect_, writable_, hide_;
};

}  // namespace belljar
