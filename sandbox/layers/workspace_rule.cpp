#include "sandbox/layers/workspace_rule.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/layers/host_modules.hpp"
#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/fd.hpp"
#include "sandbox/os/path_parts.hpp"

namespace belljar {

namespace {

bool glob_matches(const std::string& glob, const std::string& name) {
  return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

const EnvironmentShape kEnvironmentShapes[] = {
    {"a folder holding `pyvenv.cfg`", true,
     "a venv (`python -m venv`, virtualenv, uv): its interpreter runs the environment's "
     "site-packages at every start"},
    {"a folder holding `conda-meta/`", true,
     "a conda, mamba or pixi environment: `conda activate` sources its `etc/conda/activate.d`, "
     "its python runs `lib/python3.*/sitecustomize.py` and `.pth` files, with no `pyvenv.cfg`"},
    {"a folder holding `bin/python*` beside `lib/python3.*/`", true,
     "an interpreter's prefix with no marker (a conda environment stripped of `conda-meta`, "
     "`--prefix` installs, pyenv's versions): the same start-up files"},
    {"`site-packages`, `dist-packages` at any depth", false,
     "where packages and `.pth` files live, in any layout (a user site, `Lib/` on Windows, "
     "`--target` folders on `PYTHONPATH`)"},
    {"`etc/conda/activate.d`, `etc/conda/deactivate.d` at any depth", false,
     "scripts conda's shell hook sources on activation, wherever the environment's root is"},
    {"`node_modules` at any depth", false,
     "packages the host's node runs: `npx jest` runs `node_modules/.bin/jest` and everything it "
     "requires (the fifth outside pass found the links in `.bin` held and their packages open)"},
};

// git spells it HEAD alone on a case-sensitive file system (a case-insensitive one is an open
// item of docs/security.md), and `head` is a common word in datasets and models.
bool is_git_head_name(const std::string& name) {
  return name == "HEAD";
}

// A component that closes what lies below it: site-packages, dist-packages, node_modules, and
// conda's activation folders (etc/conda/activate.d) wherever they are.
bool environment_part(const std::vector<std::string>& relative, size_t i) {
  const std::string& name = relative[i];
  if (name == "site-packages" || name == "dist-packages" || name == "node_modules") return true;
  return (name == "activate.d" || name == "deactivate.d") && i >= 2 && relative[i - 1] == "conda" &&
         relative[i - 2] == "etc";
}

// Whether `folder` in `dir` holds an entry matching `glob` (a folder, with `folders_only`);
// only a folder holding both bin and lib gets here.
bool holds_matching(int dir, const char* folder, const char* glob, bool folders_only) {
  Fd sub(::openat(dir, folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sub) return false;
  DIR* stream = ::fdopendir(sub.get());
  if (!stream) return false;
  sub.release();
  bool found = false;
  while (!found) {
    dirent* entry = ::readdir(stream);
    if (!entry) break;
    if (!glob_matches(glob, entry->d_name)) continue;
    if (!folders_only) {
      found = true;
      continue;
    }
    struct stat st {};
    found = ::fstatat(::dirfd(stream), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode);
  }
  ::closedir(stream);
  return found;
}

// Whether the last component of `relative` would be imported, by a host Python started in its
// folder, in place of a module of the host's (host_modules.hpp): a module file of such a name, a
// link or rename to the bare name (a link to a package is a package), the `__init__` that makes
// a folder of such a name a package, or a plain folder of such a name — a namespace package when
// the name is an optional import the host lacks, whose submodules then run — unless the name is
// one plain_folder_harmless() lists, whose real module is always there to come first.
bool shadows_host_module(const std::vector<std::string>& relative, NameChange change) {
  const std::string& name = relative.back();
  std::string_view module = module_of(name);
  if (module.empty()) return false;
  if (module == "__init__") {
    if (relative.size() < 2) return false;
    const std::string& folder = relative[relative.size() - 2];
    return module_of(folder) == folder && host_module_name(folder);
  }
  if (!host_module_name(module)) return false;
  return module.size() != name.size() || change != NameChange::make_folder ||
         !plain_folder_harmless(module);
}

const RemovalCase kRemovalCases[] = {
    {"a folder (rmdir: empty only), a symlink, a FIFO, a socket", Removal::remove,
     "no data an open descriptor could grow: a folder holds only names the survey walks"},
    {"a regular file with another name (nlink > 1)", Removal::remove,
     "the other name keeps it, and the survey counts it there"},
    {"a regular file's last name, the broker's write lease granted", Removal::remove,
     "no other open file description exists (in flight and mapped included): its bytes dropped "
     "and the name removed while the broker holds the lease, so none can appear meanwhile; an "
     "`O_PATH` descriptor keeps only an empty inode"},
    {"a regular file's last name, the lease refused (EAGAIN: held open elsewhere)", Removal::morgue,
     "its bytes can still grow through the other descriptor: moved, still counted"},
    {"a regular file's last name, no lease to be had (leases disabled, not the owner, the "
     "broker's own open refused, the file changed meanwhile)",
     Removal::morgue, "fails closed: what cannot be shown unheld is treated as held"},
};

}  // namespace

const std::vector<RemovalCase>& removal_cases() {
  static const std::vector<RemovalCase> cases(std::begin(kRemovalCases), std::end(kRemovalCases));
  return cases;
}

bool needs_lease(unsigned mode, unsigned long links) {
  return S_ISREG(mode) && links == 1;
}

Removal removal_of(unsigned mode, unsigned long links, int lease) {
  if (!needs_lease(mode, links)) return Removal::remove;
  return lease == 0 ? Removal::remove : Removal::morgue;
}

const std::vector<EnvironmentShape>& python_environment_shapes() {
  static const std::vector<EnvironmentShape> shapes(std::begin(kEnvironmentShapes),
                                                    std::end(kEnvironmentShapes));
  return shapes;
}

bool holds_python_environment(int dir) {
  struct stat st {};
  if (::fstatat(dir, "pyvenv.cfg", &st, AT_SYMLINK_NOFOLLOW) == 0) return true;
  if (::fstatat(dir, "conda-meta", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
    return true;
  // Two cheap looks before the folders are read: an ordinary folder has no bin and lib both.
  struct stat bin {
  }, lib{};
  if (::fstatat(dir, "bin", &bin, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(bin.st_mode) ||
      ::fstatat(dir, "lib", &lib, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(lib.st_mode))
    return false;
  return holds_matching(dir, "bin", "python*", false) &&
         holds_matching(dir, "lib", "python3.*", true);
}

bool holds_git_repository(int dir) {
  // A HEAD of any kind, a dangling link included (core.preferSymlinkRefs leaves one that git
  // takes): the sandbox can make no HEAD, so one there is the host's, and with it what git
  // reads beside it (objects/ and refs/, or what `commondir` names) is closed before it is
  // there. The exact shape (HEAD, objects/, refs/) was walked around three ways by the sixth
  // outside pass: refs/ added beside a fixture's HEAD, a dangling HEAD link, objects/ a link
  // whose target was moved away for a moment.
  struct stat head {};
  return ::fstatat(dir, "HEAD", &head, AT_SYMLINK_NOFOLLOW) == 0;
}

bool holds_host_run_folder(int dir) {
  return holds_python_environment(dir) || holds_git_repository(dir);
}

bool completes_environment(const std::string& parent_name, const std::string& name, int above) {
  if (name == "pyvenv.cfg" || name == "conda-meta") return true;
  if (above < 0) return false;
  if (parent_name == "bin" && glob_matches("python*", name))
    return holds_matching(above, "lib", "python3.*", true);
  if (parent_name == "lib" && glob_matches("python3.*", name))
    return holds_matching(above, "bin", "python*", false);
  return false;
}

bool folder_completes_environment(int from_dir, const std::string& from_name,
                                  const std::string& to_name, int to_dir) {
  if (to_name == "lib")
    return holds_matching(from_dir, from_name.c_str(), "python3.*", true) &&
           holds_matching(to_dir, "bin", "python*", false);
  if (to_name == "bin")
    return holds_matching(from_dir, from_name.c_str(), "python*", false) &&
           holds_matching(to_dir, "lib", "python3.*", true);
  return false;
}

bool holds_shell_start_up(int dir) {
  static const char* const kStartUp[] = {".profile",  ".bash_profile", ".bash_login",
                                         ".zprofile", ".zlogin",       ".bashrc",
                                         ".zshrc",    ".cshrc",        ".tcshrc"};
  struct stat st {};
  for (const char* name : kStartUp)
    if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) return true;
  return false;
}

bool environment_marker(const std::string& parent, const std::string& name) {
  return name == "pyvenv.cfg" || name == "conda-meta" || name == "bin" || name == "lib" ||
         ((parent == "bin" || parent == "lib") && name.rfind("python", 0) == 0);
}

WorkspaceRule::WorkspaceRule(const std::vector<std::string>& protect,
                             const std::vector<std::string>& writable,
                             const std::vector<std::string>& hide)
    : protect_(compiled(protect)), writable_(compiled(writable)), hide_(compiled(hide)) {}

std::vector<WorkspaceRule::Pattern> WorkspaceRule::compiled(
    const std::vector<std::string>& patterns) {
  std::vector<Pattern> out;
  for (const auto& text : patterns) {
    Pattern pattern{!text.empty() && text[0] == '/', path_components(text)};
    if (!pattern.parts.empty()) out.push_back(std::move(pattern));
  }
  return out;
}

bool WorkspaceRule::Pattern::matches(const std::vector<std::string>& path, size_t length) const {
  if (parts.size() > length || (anchored && parts.size() != length)) return false;
  size_t offset = length - parts.size();
  for (size_t i = 0; i < parts.size(); ++i)
    if (!glob_matches(parts[i], path[offset + i])) return false;
  return true;
}

bool WorkspaceRule::Pattern::below(const std::vector<std::string>& path) const {
  if (parts.size() <= 1 || path.empty()) return false;
  for (size_t k = anchored ? path.size() : 1; k < parts.size() && k <= path.size(); ++k) {
    size_t offset = path.size() - k;
    bool all = true;
    for (size_t i = 0; i < k && all; ++i) all = glob_matches(parts[i], path[offset + i]);
    if (all) return true;
    if (anchored) break;
  }
  return false;
}

std::optional<std::string> WorkspaceRule::refusal(const std::vector<std::string>& relative,
                                                  NameChange change) const {
  if (relative.empty()) return "the workspace itself";
  // The quota's survey reads kMaxDepth folders deep and masks what lies below, uncounted: a
  // name that deep would hold bytes no quota sees (the outside red team's third pass: 301 MiB
  // under --workspace-quota 32M, left on the host).
  if (relative.size() >= kMaxDepth)
    return "deeper than the quota's survey reads (" + std::to_string(kMaxDepth) + " folders)";
  // Not even --writable opens it: what lies there is what the quota still counts.
  if (relative[0] == kMorgueName) return "belljar's morgue (files removed while still open)";
  bool opened = false;  // a --writable pattern names this path or one above it
  for (size_t length = 1; length <= relative.size(); ++length) {
    for (const auto& pattern : protect_)
      if (pattern.matches(relative, length)) return "protected";
    for (const auto& pattern : hide_)
      if (pattern.matches(relative, length))
        return "a secret's name, which the survey masks (each one a mount at the next start)";
    for (const auto& pattern : writable_) opened = opened || pattern.matches(relative, length);
  }
  if (opened) return std::nullopt;
  for (size_t i = 0; i < relative.size(); ++i) {
    const std::string& part = relative[i];
    if (!part.empty() && part[0] == '.') {
      if (change == NameChange::make_folder && i + 1 == relative.size())
        for (const auto& pattern : writable_)
          if (pattern.below(relative)) return std::nullopt;
      return "a dot-path, which host tools read";
    }
    if (environment_part(relative, i))
      return part == "node_modules" ? "inside node_modules, whose packages the host's node runs"
                                    : "inside a Python environment";
  }
  // A file named HEAD beside objects/ and refs/ makes any folder a git repository, which the
  // host's git finds from every folder below it and then obeys: its config (fsmonitor, hooks)
  // ran on the next `git status` in the workspace (the fifth outside pass). Each part may be
  // made in any order, moved in or be a link, so the name that completes every shape is closed
  // where it stands: HEAD (and a folder holding one is closed whole: holds_git_repository).
  if (is_git_head_name(relative.back()))
    return "a git repository's HEAD by name, which makes its folder a repository the host's git "
           "finds and obeys";
  if (shadows_host_module(relative, change))
    return "a module of the host's Python by name, which Python started in this folder imports "
           "(a stock Jupyter kernel, python -m, pip)";
  return std::nullopt;
}

}  // namespace belljar
