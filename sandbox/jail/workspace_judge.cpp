#include "sandbox/jail/workspace_judge.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // RENAME_EXCHANGE

namespace belljar {

namespace {

constexpr size_t kMaxScanned = 100000;  // entries below a folder that is to be renamed

const char* const kMakesAnEnvironment =
    "it would make its folder a Python environment, closed to every later session";

std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (const auto& part : parts) text += (text.empty() ? "" : "/") + part;
  return text;
}

// `path`'s components below `dir`'s (empty: `dir` itself), or nothing when outside it.
std::optional<std::vector<std::string>> below(const std::vector<std::string>& path,
                                              const std::vector<std::string>& dir) {
  if (path.size() < dir.size()) return std::nullopt;
  for (size_t i = 0; i < dir.size(); ++i)
    if (path[i] != dir[i]) return std::nullopt;
  return std::vector<std::string>(path.begin() + static_cast<long>(dir.size()), path.end());
}

// Depth first below `dir`; `found` gets each entry's components (and whether it is an
// environment's marker or root: pyvenv.cfg, conda-meta, a folder of an environment's shape) and
// stops the walk by returning true. A folder that cannot be opened or read sets `unreadable` and
// stops it too.
template <typename Found>
bool scan(int dir, std::vector<std::string> inner, size_t& seen, bool& unreadable, Found&& found) {
  Fd copy(::fcntl(dir, F_DUPFD_CLOEXEC, 0));
  DIR* stream = copy ? ::fdopendir(copy.get()) : nullptr;
  if (!stream) {
    unreadable = true;
    return true;
  }
  copy.release();
  bool stop = false;
  while (!stop) {
    errno = 0;
    dirent* entry = ::readdir(stream);
    if (!entry) {
      if (errno != 0) unreadable = stop = true;
      break;
    }
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (++seen > kMaxScanned) {
      stop = true;
      break;
    }
    inner.push_back(name);
    // An environment's marker names its folder; a prefix's shape (bin/python* beside
    // lib/python3.*) is looked at below, on each folder as it is entered.
    if (found(inner, name == "pyvenv.cfg" || name == "conda-meta")) {
      stop = true;
    } else if (entry->d_type == DT_DIR || entry->d_type == DT_UNKNOWN) {
      Fd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub && holds_python_environment(sub.get()) && found(inner, true))
        stop = true;
      else if (sub)
        stop = scan(sub.get(), inner, seen, unreadable, found);
      else if (errno != ENOTDIR && errno != ELOOP)  // a file or a link after all
        unreadable = stop = true;
    }
    inner.pop_back();
  }
  ::closedir(stream);
  return stop || seen > kMaxScanned;
}

enum class MountRoot { no, yes, unknown };

// Whether the name `name` in `dir` is a mount's root as the sandbox's tree shows it (the walk's
// descriptors are the sandbox's, so its mounts are crossed): what cannot be looked at is
// unknown, and refused.
MountRoot mount_root(int dir, const std::string& name) {
  struct statx stx {};
  if (::statx(dir, name.c_str(), AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, 0, &stx) != 0)
    return errno == ENOENT || errno == ENOTDIR ? MountRoot::no : MountRoot::unknown;
  if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) return MountRoot::no;  // the list's
  return (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ? MountRoot::yes : MountRoot::no;
}

}  // namespace

const char* change_name(Change change) {
  switch (change) {
    case Change::create:
    case Change::make_folder:
      return "create";
    case Change::write:
      return "write";
    case Change::remove:
      return "remove";
    case Change::rename:
      return "rename";
    case Change::mode:
      return "mode";
    case Change::owner:
      return "owner";
    case Change::times:
      return "times";
    case Change::link:
      return "link";
  }
  return "change";
}

int outside_roots(int dir) {
  struct statfs fs {};
  return ::fstatfs(dir, &fs) == 0 && (fs.f_flags & ST_RDONLY) ? EROFS : EACCES;
}

std::optional<std::vector<std::string>> WorkspaceJudge::in_workspace(const WalkedPath& at) const {
  std::vector<std::string> full = at.where;
  if (!at.name.empty()) full.push_back(at.name);
  return below(full, workspace_);
}

int WorkspaceJudge::refuse(const std::vector<std::string>& relative, Change change,
                           const std::string& why) {
  refuse_({joined(relative), change_name(change), why});
  return change == Change::mode || change == Change::owner || change == Change::times ? EPERM
                                                                                      : EACCES;
}

int WorkspaceJudge::decide(const WalkedPath& at, Change change) {
  if (int error = decide_name(at, change)) return error;
  if (change == Change::remove)
    if (int error = decide_mount(at, change)) return error;
  return decide_held(at, change);
}

int WorkspaceJudge::decide_name(const WalkedPath& at, Change change) {
  if (int error = decide_links(at, change)) return error;
  auto relative = in_workspace(at);
  if (!relative) {
    std::vector<std::string> full = at.where;
    full.push_back(at.name);
    // below a root; a root itself only to write into (a device bound there)
    for (const auto& root : roots_) {
      if (!below(full, root)) continue;
      if (full.size() == root.size()) {
        if (change == Change::write) return 0;
        continue;
      }
      // A read-only folder bound below a root (--ro under /tmp): the kernel refuses a file
      // there, but not a FIFO or a device opened for writing.
      return outside_roots(at.parent.get()) == EROFS ? EROFS : 0;
    }
    return outside_roots(at.parent.get());
  }
  // An environment found on disk first: its reason is the more telling one (a sitecustomize.py
  // there is also a module of the host's by name), and no --writable opens it.
  std::optional<std::string> why = host_run_folder(at);
  if (!why)
    why = rule_.refusal(
        *relative, change == Change::make_folder ? NameChange::make_folder : NameChange::other);
  bool changes_the_file = change == Change::write || change == Change::mode ||
                          change == Change::owner || change == Change::times;
  if (!why && changes_the_file && has_other_names(at))
    why =
        "the file has another name (a hard link made outside the sandbox), which may be a "
        "protected file's";
  if (!why && in_a_homes_bin(at, *relative))
    why = "a home's bin (the folder holds a shell's start-up file), first on its PATH";
  if (!why && change != Change::remove && makes_an_environment(at)) why = kMakesAnEnvironment;
  if (!why) return 0;
  return refuse(*relative, change, *why);
}

int WorkspaceJudge::decide_rename(const WalkedPath& from, const WalkedPath& to, unsigned flags) {
  if (int error = decide_name(from, Change::rename)) return error;
  if (int error = decide_name(to, Change::rename)) return error;
  if (int error = decide_subtree(from, to)) return error;
  if (int error = decide_environment_by_rename(from, to)) return error;
  bool exchange = (flags & RENAME_EXCHANGE) != 0;
  if (exchange) {
    if (int error = decide_subtree(to, from)) return error;
    // Exchanged, each goes where the other was (a bin holding python* for an empty one).
    if (int error = decide_environment_by_rename(to, from)) return error;
  }
  if (int error = decide_mount(from, Change::rename)) return error;
  if (int error = decide_mount(to, Change::rename)) return error;
  if (int error = decide_held(from, Change::rename, true)) return error;
  if (int error = decide_held(to, Change::rename, exchange)) return error;
  if (int error = decide_way(from, to)) return error;
  return exchange ? decide_way(to, from) : 0;
}

std::optional<std::string> WorkspaceJudge::held_reason(
    const std::vector<std::string>& relative) const {
  const HeldName* held = held_ ? held_->holding(relative) : nullptr;
  if (!held) return std::nullopt;
  return "on the way of the protected link " + held->link +
         (held->path.empty() ? " (it leads to the workspace itself)" : "");
}

// Whether a read-only mount holds `at` (strict mode's guards, the quota's switch): the kernel
// then answers the change itself (EROFS), as it did before names were held.
bool WorkspaceJudge::on_read_only_mount(const WalkedPath& at) {
  struct statvfs vfs {};
  Fd object(at.name.empty()
                ? -1
                : ::openat(at.parent.get(), at.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  int looked = object ? ::fstatvfs(object.get(), &vfs) : ::fstatvfs(at.parent.get(), &vfs);
  return looked == 0 && (vfs.f_flag & ST_RDONLY);
}

// The names on protected links' ways, after the rule and the mounts answered: a held name and
// what lies below it is not changed, and a folder on a way is not moved (what it holds on the
// way would go with it: `moved`). What a read-only mount holds is the kernel's to refuse.
int WorkspaceJudge::decide_held(const WalkedPath& at, Change change, bool moved) {
  auto relative = in_workspace(at);
  if (!held_ || !relative) return 0;
  std::optional<std::string> why = held_reason(*relative);
  if (!why && moved)
    if (const HeldName* way = held_->first_beyond(*relative))
      why = "a folder on the way of the protected link " + way->link;
  if (!why || on_read_only_mount(at)) return 0;
  return refuse(*relative, change, *why);
}

// A regular file with more than one name: the sandbox makes no hard link (EPERM), so the host
// made it, and the other name may be a protected one.
bool WorkspaceJudge::has_other_names(const WalkedPath& at) {
  struct stat st {};
  if (at.name.empty() || ::fstatat(at.parent.get(), at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return false;  // not there: a new name
  return S_ISREG(st.st_mode) && st.st_nlink > 1;
}

// `from` moved to `to`, a folder on a held name's way: what lands there and on the rest of the
// way may not be a link (the protected link's way would lead elsewhere: `.bashrc ->
// d/bashrc`, and a link `x -> notes` renamed to `d`), nor bring the held name itself. Names
// that are not there yet are judged when made.
int WorkspaceJudge::decide_way(const WalkedPath& from, const WalkedPath& to) {
  auto to_rel = in_workspace(to);
  if (!held_ || !to_rel || from.name.empty()) return 0;
  for (const HeldName* held : held_->beyond(*to_rel)) {
    Fd dir(::fcntl(from.parent.get(), F_DUPFD_CLOEXEC, 0));
    std::string name = from.name;
    // The components of the way from where the moved object lands to the held name's folder.
    for (size_t i = to_rel->size(); dir; ++i) {
      struct stat st {};
      if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) break;
      if (S_ISLNK(st.st_mode))
        return refuse(*to_rel, Change::rename,
                      "a link would stand on the way of the protected link " + held->link);
      if (i >= held->path.size())
        return refuse(*to_rel, Change::rename,
                      "it would bring a name on the way of the protected link " + held->link);
      if (!S_ISDIR(st.st_mode)) break;
      dir = Fd(::openat(dir.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      name = held->path[i];
    }
  }
  return 0;
}

// Degraded mode: a link in the workspace whose own name the rule closes, followed on the way
// (the host's .bashrc -> dotfiles/bashrc): what is changed through it is changed under that name
// for every host tool that reads it.
int WorkspaceJudge::decide_links(const WalkedPath& at, Change change) {
  if (!links_by_name_) return 0;
  for (const auto& link : at.links) {
    auto relative = below(link, workspace_);
    if (!relative || relative->empty()) continue;
    if (auto why = rule_.refusal(*relative, NameChange::other))
      return refuse(*relative, change, "reached through this link; " + *why);
  }
  return 0;
}

// A mount point of the sandbox, or a folder above one (the workspace's own path among them):
// the broker's rename or unlink, made in the host's mount namespace, would move or remove it
// and the mount with it (EBUSY, the kernel's answer in the sandbox's own namespace).
int WorkspaceJudge::decide_mount(const WalkedPath& at, Change change) {
  if (at.name.empty()) return 0;  // the root: the handlers answer it before the judge
  std::vector<std::string> full = at.where;
  full.push_back(at.name);
  std::optional<std::string> why;
  if (below(workspace_, full)) {
    why = "the workspace lies below it";
  } else if (MountRoot seen = mount_root(at.parent.get(), at.name); seen != MountRoot::no) {
    why = seen == MountRoot::yes ? "a mount of the sandbox" : "it could not be looked at";
  } else if (mounts_) {
    const SandboxMounts* list = mounts_();
    if (!list)
      why = "the sandbox's mounts could not be read";
    else if (list->at_or_above(full))
      why = "a mount of the sandbox is at or below it";
  }
  if (!why) return 0;
  auto relative = in_workspace(at);
  refuse_({relative ? joined(*relative) : "/" + joined(full), change_name(change), *why});
  return EBUSY;
}

int WorkspaceJudge::replacement_refusal(const struct stat& moved, const struct stat& replaced) {
  if (S_ISDIR(moved.st_mode) && !S_ISDIR(replaced.st_mode)) return ENOTDIR;
  if (!S_ISDIR(moved.st_mode) && S_ISDIR(replaced.st_mode)) return EISDIR;
  return 0;
}

int WorkspaceJudge::decide_link(const WalkedPath& at, const std::string& target) {
  auto relative = in_workspace(at);
  if (!relative) return 0;
  WalkedPath points;
  SandboxPaths paths(root_);
  int error = paths.walk(at.where, target, true, points);
  auto target_rel = error ? std::nullopt : in_workspace(points);
  if (!target_rel || target_rel->empty())
    return refuse(*relative, Change::link, "a link that leads out of the workspace");
  const HeldName* way = held_ ? held_->first_beyond(*relative) : nullptr;
  if (way && !on_read_only_mount(at))
    return refuse(*relative, Change::link,
                  "a link would stand on the way of the protected link " + way->link);
  return decide(points, Change::link);
}

int WorkspaceJudge::decide_mode(const WalkedPath& at, const struct stat& st, mode_t mode) {
  if (int error = decide(at, Change::mode)) return error;
  if (mode & (S_ISUID | S_ISGID)) return EPERM;
  auto relative = in_workspace(at);
  if (S_ISDIR(st.st_mode) && relative && (mode & (S_IRUSR | S_IXUSR)) != (S_IRUSR | S_IXUSR))
    return refuse(*relative, Change::mode,
                  "a folder its owner could not read (the quota counts every folder)");
  return 0;
}

// A folder moved into place as a `bin` or a `lib` that completes an environment's shape
// (folder_completes_environment): refused as a name that does would be.
int WorkspaceJudge::decide_environment_by_rename(const WalkedPath& from, const WalkedPath& to) {
  auto to_rel = in_workspace(to);
  if (!to_rel ||
      !folder_completes_environment(from.parent.get(), from.name, to.name, to.parent.get()))
    return 0;
  return refuse(*to_rel, Change::rename, kMakesAnEnvironment);
}

// A folder to be moved: nothing the rule closes may lie below it, judged where it stands and
// where it goes.
int WorkspaceJudge::decide_subtree(const WalkedPath& from, const WalkedPath& to) {
  auto from_rel = in_workspace(from), to_rel = in_workspace(to);
  if (!from_rel && !to_rel) return 0;
  Fd top(::openat(from.parent.get(), from.name.c_str(),
                  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!top && (errno == ENOTDIR || errno == ELOOP)) return 0;  // not a folder: nothing below
  size_t seen = 0;
  bool unreadable = !top;
  std::optional<std::string> why;
  std::vector<std::string> found;
  if (top && holds_python_environment(top.get())) {
    why = "it is a Python environment";
    found = from_rel ? *from_rel : *to_rel;
  } else if (top) {
    scan(top.get(), {}, seen, unreadable, [&](const std::vector<std::string>& inner, bool is_venv) {
      for (const auto* base : {&from_rel, &to_rel}) {
        if (!*base) continue;
        std::vector<std::string> rel = **base;
        rel.insert(rel.end(), inner.begin(), inner.end());
        if (is_venv || rule_.closed(rel)) {
          why = is_venv ? "it holds a Python environment" : "it holds " + joined(rel);
          found = **base;
          return true;
        }
      }
      return false;
    });
  }
  // Fails closed: what could not be looked at may hold anything.
  if (!why && (seen > kMaxScanned || unreadable)) {
    why = unreadable ? "it holds a folder the broker cannot read"
                     : "it holds more than 100000 entries to check";
    found = from_rel ? *from_rel : *to_rel;
  }
  if (!why) return 0;
  return refuse(found, Change::rename, *why);
}

// Whether the name `at` holds would complete an environment's shape on disk
// (completes_environment), looked at from the walked folder and the one above it.
bool WorkspaceJudge::makes_an_environment(const WalkedPath& at) const {
  if (at.name.empty()) return false;
  std::string parent = at.where.empty() ? std::string() : at.where.back();
  Fd above(::openat(at.parent.get(), "..", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  return completes_environment(parent, at.name, above ? above.get() : -1);
}

// Whether a component of `relative` is a `bin` whose folder is a home by its shape
// (holds_shell_start_up). The folders are reached from the walked one by "..": the broker
// answers one call at a time, so no brokered rename moves them meanwhile.
bool WorkspaceJudge::in_a_homes_bin(const WalkedPath& at,
                                    const std::vector<std::string>& relative) const {
  for (size_t i = 0; i < relative.size(); ++i) {
    if (relative[i] != "bin") continue;
    Fd dir(::fcntl(at.parent.get(), F_DUPFD_CLOEXEC, 0));
    for (size_t up = relative.size() - 1 - i; dir && up > 0; --up)
      dir = Fd(::openat(dir.get(), "..", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    // What cannot be looked at may be a home: refused.
    if (!dir || holds_shell_start_up(dir.get())) return true;
  }
  return false;
}

// Why a folder from the workspace's root down to the target's (the walk marked them,
// holds_host_run_folder) closes it: a Python environment's root (workspace_rule.hpp's table; no
// --writable opens it), or a git repository by its shape whose name is no dot-name (a `.git` is
// the dot rule's, which --writable .git opens). Nothing when none does.
std::optional<std::string> WorkspaceJudge::host_run_folder(const WalkedPath& at) const {
  // marked[i]: the folder of the first i components of `where` (marked[0]: the root).
  for (size_t i = workspace_.size(); i < at.marked.size() && i <= at.where.size(); ++i) {
    if (!at.marked[i]) continue;
    Fd dir(::fcntl(at.parent.get(), F_DUPFD_CLOEXEC, 0));
    for (size_t up = at.where.size() - i; dir && up > 0; --up)
      dir = Fd(::openat(dir.get(), "..", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir || holds_python_environment(dir.get())) return "inside a Python environment";
    // A repository inside a dot-path is the dot rule's, which --writable opens: `.git` itself,
    // and its own folders that hold a HEAD (logs/ for the reflog, worktrees/*, modules/*; the
    // outside pass found `--writable .git` unable to commit once logs/ was taken as one).
    bool dotted = false;
    for (size_t part = workspace_.size(); part < i; ++part)  // below the workspace's root only
      dotted = dotted || at.where[part][0] == '.';
    if (i > 0 && !dotted) return "inside a git repository (the host's git runs its hooks)";
  }
  return std::nullopt;
}

}  // namespace belljar
