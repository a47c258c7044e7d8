#include "sandbox/jail/workspace_broker.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <optional>
#include <set>

#include "sandbox/jail/located_folders.hpp"
#include "sandbox/jail/sandbox_paths.hpp"
#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/path_parts.hpp"
#include "sandbox/os/setup_error.hpp"
#include "sandbox/os/small_file.hpp"

namespace belljar {

namespace {

constexpr size_t kMaxReported = 4096;   // paths said once each; past this, said no more
constexpr size_t kMaxScanned = 100000;  // entries below a folder that is to be renamed
constexpr int kSysFchmodat2 = 452;      // Linux 6.6, newer than some headers
constexpr int kOTmpfileBit = 020000000;
// SECCOMP_IOCTL_NOTIF_SET_FLAGS and SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, newer than the headers.
constexpr unsigned long kIoctlNotifSetFlags = _IOW('!', 4, uint64_t);
constexpr uint64_t kUserNotifFdSyncWakeUp = 1;

enum class Change { create, make_folder, write, remove, rename, mode, owner, times, link };

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

std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (const auto& part : parts) text += (text.empty() ? "" : "/") + part;
  return text;
}

// Components as an absolute path ("/" for none).
std::string absolute(const std::vector<std::string>& parts) {
  return parts.empty() ? "/" : "/" + joined(parts);
}

// `path`'s components below `dir`'s (empty: `dir` itself), or nothing when outside it.
std::optional<std::vector<std::string>> below(const std::vector<std::string>& path,
                                              const std::vector<std::string>& dir) {
  if (path.size() < dir.size()) return std::nullopt;
  for (size_t i = 0; i < dir.size(); ++i)
    if (path[i] != dir[i]) return std::nullopt;
  return std::vector<std::string>(path.begin() + static_cast<long>(dir.size()), path.end());
}

// Bytes of the caller's memory: process_vm_readv, or its /proc/PID/mem where a container's
// profile refuses that call (Docker's default and belljar's own pod profile do).
ssize_t read_memory(pid_t pid, uint64_t address, char* buf, size_t want) {
  // A property of where the warden runs, learnt once: the broker's thread alone reads it.
  static bool through_proc = false;
  if (!through_proc) {
    iovec local{buf, want}, remote{reinterpret_cast<void*>(address), want};
    ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n >= 0 || (errno != EPERM && errno != ENOSYS)) return n;
    through_proc = true;
  }
  Fd mem(::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC));
  if (!mem) return -1;
  return ::pread(mem.get(), buf, want, static_cast<off_t>(address));
}

// A NUL-terminated string of the caller's, read once, a page at a time (the string may end
// just before an unmapped page).
int read_string(pid_t pid, uint64_t address, std::string& out) {
  if (address == 0) return EFAULT;
  out.clear();
  const uint64_t page = 4096;
  while (out.size() < kMaxPathBytes) {
    char buf[4096];
    size_t want = static_cast<size_t>(page - (address % page));
    ssize_t n = read_memory(pid, address, buf, want);
    if (n <= 0) return n == 0 ? EFAULT : (errno == ESRCH ? ESRCH : EFAULT);
    const char* end = static_cast<const char*>(std::memchr(buf, '\0', static_cast<size_t>(n)));
    if (end) {
      out.append(buf, static_cast<size_t>(end - buf));
      return out.size() < kMaxPathBytes ? 0 : ENAMETOOLONG;
    }
    out.append(buf, static_cast<size_t>(n));
    address += static_cast<uint64_t>(n);
  }
  return ENAMETOOLONG;
}

std::string proc_path(pid_t pid, const std::string& rest) {
  return "/proc/" + std::to_string(pid) + "/" + rest;
}

// The thread group a thread belongs to (pidfd_open takes only a group's leader before 6.9).
pid_t tgid_of(pid_t tid) {
  std::string status = read_small_file(proc_path(tid, "status"));
  auto at = status.find("\nTgid:\t");
  return at == std::string::npos
             ? tid
             : static_cast<pid_t>(std::strtol(status.c_str() + at + 7, nullptr, 10));
}

constexpr unsigned kPidfdThread = O_EXCL;  // PIDFD_THREAD, Linux 6.9

// The callers' umask. Only /proc/TID/status says a thread's umask, and rendering it is the
// costliest step of a brokered create, so it is read once: every process under the filter
// descends from the worker and inherits its umask, and only umask() changes one, which is
// notified too. Once any thread of the sandbox calls it, nothing is kept any more (the call
// takes effect after the broker lets it run, so a value read meanwhile could be stale), and
// each caller's own is read. Python and its libraries rarely call it; pip does, once per
// install.
class Umasks {
 public:
  mode_t of(pid_t tid) {
    if (caching_ && known_) return *known_;
    std::string status = read_small_file(proc_path(tid, "status"));
    auto at = status.find("\nUmask:\t");
    if (at == std::string::npos) return 077;  // unknown: the strictest
    mode_t mask = static_cast<mode_t>(std::strtoul(status.c_str() + at + 8, nullptr, 8) & 0777);
    if (caching_) known_ = mask;
    return mask;
  }
  void changing() {
    caching_ = false;
    known_.reset();
  }

 private:
  std::optional<mode_t> known_;
  bool caching_ = true;
};

// What the kernel would have said to a change outside the writable places: EROFS on a
// read-only mount (most of the sandbox's root), EACCES elsewhere.
int outside_roots(int dir) {
  struct statfs fs {};
  return ::fstatfs(dir, &fs) == 0 && (fs.f_flags & ST_RDONLY) ? EROFS : EACCES;
}

// Whether the walk's last name is there (its lstat in `st`), as the walk saw it a moment ago
// when it looked; what changes it since is made with O_EXCL or fails on its own.
bool exists(const WalkedPath& at, struct stat& st) {
  if (at.seen == WalkedPath::Seen::there) st = at.seen_stat;
  if (at.seen != WalkedPath::Seen::unseen) return at.seen == WalkedPath::Seen::there;
  return ::fstatat(at.parent.get(), at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// What the caller's own descriptor may be, to be opened again through /proc/self/fd/N (and
// /dev/fd/N, /dev/stdin, /dev/stdout, /dev/stderr), decided on the object the broker holds:
// the complete list (docs/security.md, "The workspace is a wall"). Everything else is refused.
enum class Reopenable {
  pipe,     // an anonymous pipe (pipefs): `> /dev/stderr` when stderr is a pipe; no name
  socket,   // refused as the kernel refuses it (ENXIO): a socket cannot be opened
  by_name,  // a named FIFO or a character device: judged as an open of its name would be
  refused,  // a file, a folder, a link, a block device, an anonymous inode: a name the rule
            // never saw (open it by its name instead)
};

constexpr long kPipefsMagic = 0x50495045;  // PIPEFS_MAGIC

Reopenable reopenable(int held, const struct stat& st) {
  if (S_ISFIFO(st.st_mode)) {
    struct statfs fs {};
    if (::fstatfs(held, &fs) != 0) return Reopenable::refused;
    return fs.f_type == kPipefsMagic ? Reopenable::pipe : Reopenable::by_name;
  }
  if (S_ISSOCK(st.st_mode)) return Reopenable::socket;
  if (S_ISCHR(st.st_mode)) return Reopenable::by_name;
  return Reopenable::refused;
}

}  // namespace

// One stopped call: its arguments, and what answering it needs.
struct WorkspaceBroker::Call {
  uint64_t id = 0;
  pid_t pid = 0;
  int nr = -1;
  uint64_t args[6] = {};
  int listener = -1;
  bool answered = false;

  int arg_int(int i) const { return static_cast<int>(static_cast<uint32_t>(args[i])); }
  bool still_waiting() const {
    uint64_t copy = id;
    return ::ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &copy) == 0;
  }
  void reply(int error, int64_t value = 0) {
    if (answered) return;
    answered = true;
    seccomp_notif_resp resp{};
    resp.id = id;
    resp.error = error ? -error : 0;
    resp.val = error ? 0 : value;
    ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  }
  void let_run() {
    if (answered) return;
    answered = true;
    seccomp_notif_resp resp{};
    resp.id = id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  }
  // Installs `fd` in the caller and makes its number the call's result, atomically.
  void reply_fd(int fd, bool cloexec) {
    if (answered) return;
    answered = true;
    seccomp_notif_addfd add{};
    add.id = id;
    add.flags = SECCOMP_ADDFD_FLAG_SEND;
    add.srcfd = static_cast<uint32_t>(fd);
    add.newfd_flags = cloexec ? O_CLOEXEC : 0;
    if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0 && errno != ENOENT) {
      answered = false;
      reply(errno == EMFILE ? EMFILE : EIO);
    }
  }
};

namespace {

// What one answer needs: the rule, the sandbox's paths, and the caller.
class Judge {
 public:
  Judge(const BrokerSettings& settings, const std::vector<std::string>& workspace,
        const std::vector<std::vector<std::string>>& roots, int root, pid_t pid,
        LocatedFolders& located, uint64_t generation, std::function<void(BrokerRefusal)> refuse)
      : settings_(settings),
        workspace_(workspace),
        roots_(roots),
        root_(root),
        paths_(root, &holds_python_environment, workspace.size()),
        pid_(pid),
        located_(located),
        generation_(generation),
        refuse_(std::move(refuse)) {}

  // Resolves the path at `address`, relative to `dirfd` (AT_FDCWD: the caller's cwd).
  int resolve(int dirfd, uint64_t address, bool follow_last, WalkedPath& out) {
    std::string path;
    if (int error = read_string(pid_, address, path)) return error;
    return resolve_text(dirfd, path, follow_last, out);
  }

  // The same for a path already read (a unix socket's, from its sockaddr).
  int resolve_text(int dirfd, const std::string& path, bool follow_last, WalkedPath& out) {
    if (path.empty()) return ENOENT;
    const WalkStart* start = nullptr;
    static const WalkStart kRoot;
    if (path[0] != '/') {
      std::string base = dirfd == AT_FDCWD ? "cwd" : "fd/" + std::to_string(dirfd);
      Fd dir(::open(proc_path(pid_, base).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (!dir) return errno == ENOTDIR ? ENOTDIR : dirfd == AT_FDCWD ? ENOENT : EBADF;
      start = located_.find(paths_, root_, dir.get(), generation_);
      if (!start) return ENOENT;
    }
    // The folder the last name lives in, as text from the root, when the path names it plainly
    // (no "." or "..", no trailing "/"): a folder walked to before is taken from there.
    auto parts = path_components(path);
    bool ends_in_dot = path.back() == '.' && (path.size() == 1 || path[path.size() - 2] == '/');
    bool plain = !parts.empty() && path.back() != '/' && !ends_in_dot;
    for (const auto& part : parts) plain = plain && part != "..";
    std::string folder;
    if (plain) {
      std::vector<std::string> above = start ? start->where : std::vector<std::string>{};
      above.insert(above.end(), parts.begin(), parts.end() - 1);
      folder = absolute(above);
      if (const WalkStart* known = located_.by_path(folder, generation_))
        return paths_.walk(*known, parts.back(), follow_last, out);
    }
    int error = paths_.walk(start ? *start : kRoot, path, follow_last, out);
    if (error == 0 && plain && absolute(out.where) == folder)
      located_.remember(root_, out, folder, generation_);
    return error;
  }

  // The target's components below the workspace, if it is in it.
  std::optional<std::vector<std::string>> in_workspace(const WalkedPath& at) const {
    std::vector<std::string> full = at.where;
    if (!at.name.empty()) full.push_back(at.name);
    return below(full, workspace_);
  }

  // The name of an object the broker holds (`held`, any descriptor of it): its /proc/self/fd
  // text walked from the sandbox's root, only when that walk leads to the very same object (a
  // file since renamed or unlinked, or one outside this root, has none).
  bool name_of(int held, WalkedPath& at) const {
    char buf[kMaxPathBytes];
    std::string self = "/proc/self/fd/" + std::to_string(held);
    ssize_t n = ::readlink(self.c_str(), buf, sizeof buf);
    if (n <= 0 || static_cast<size_t>(n) >= sizeof buf || buf[0] != '/') return false;
    if (paths_.walk(WalkStart{}, std::string_view(buf, static_cast<size_t>(n)), false, at) != 0 ||
        at.name.empty())
      return false;
    ObjectId named, same;
    Fd again(::openat(at.parent.get(), at.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    return again && object_id(again.get(), named) && object_id(held, same) && named == same;
  }

  // 0 when the change may be made; the errno for the caller otherwise (the refusal recorded).
  int decide(const WalkedPath& at, Change change) {
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
    std::optional<std::string> why;
    if (in_environment(at))
      why = "inside a Python environment";
    else
      why = settings_.rule.refusal(
          *relative, change == Change::make_folder ? NameChange::make_folder : NameChange::other);
    if (!why && in_a_homes_bin(at, *relative))
      why = "a home's bin (the folder holds a shell's start-up file), first on its PATH";
    if (!why && change != Change::remove && makes_an_environment(at))
      why = "it would make its folder a Python environment, closed to every later session";
    if (!why) return 0;
    refuse_({joined(*relative), change_name(change), *why});
    return change == Change::mode || change == Change::owner || change == Change::times ? EPERM
                                                                                        : EACCES;
  }

  // A folder moved into place as a `bin` or a `lib` that completes an environment's shape
  // (folder_completes_environment): refused as a name that does would be.
  int decide_environment_by_rename(const WalkedPath& from, const WalkedPath& to) {
    auto to_rel = in_workspace(to);
    if (!to_rel ||
        !folder_completes_environment(from.parent.get(), from.name, to.name, to.parent.get()))
      return 0;
    refuse_({joined(*to_rel), "rename",
             "it would make its folder a Python environment, closed to every later session"});
    return EACCES;
  }

  // A folder to be moved: nothing the rule closes may lie below it, judged where it stands
  // and where it goes.
  int decide_subtree(const WalkedPath& from, const WalkedPath& to) {
    auto from_rel = in_workspace(from), to_rel = in_workspace(to);
    if (!from_rel && !to_rel) return 0;
    Fd top(::openat(from.parent.get(), from.name.c_str(),
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!top && (errno == ENOTDIR || errno == ELOOP)) return 0;  // not a folder: nothing below
    size_t seen = 0;
    bool unreadable = !top;
    std::optional<std::string> why;
    std::string found;
    if (top && holds_python_environment(top.get())) {
      why = "it is a Python environment";
      found = joined(from_rel ? *from_rel : *to_rel);
    } else if (top) {
      scan(top.get(), {}, seen, unreadable,
           [&](const std::vector<std::string>& inner, bool is_venv) {
             for (const auto* base : {&from_rel, &to_rel}) {
               if (!*base) continue;
               std::vector<std::string> rel = **base;
               rel.insert(rel.end(), inner.begin(), inner.end());
               if (is_venv || settings_.rule.closed(rel)) {
                 why = is_venv ? "it holds a Python environment" : "it holds " + joined(rel);
                 found = joined(**base);
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
      found = joined(from_rel ? *from_rel : *to_rel);
    }
    if (!why) return 0;
    refuse_({found, "rename", *why});
    return EACCES;
  }

 private:
  // Whether the name `at` holds would complete an environment's shape on disk
  // (completes_environment), looked at from the walked folder and the one above it.
  bool makes_an_environment(const WalkedPath& at) const {
    if (at.name.empty()) return false;
    std::string parent = at.where.empty() ? std::string() : at.where.back();
    Fd above(::openat(at.parent.get(), "..", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    return completes_environment(parent, at.name, above ? above.get() : -1);
  }

  // Whether a component of `relative` is a `bin` whose folder is a home by its shape
  // (holds_shell_start_up). The folders are reached from the walked one by "..": the broker
  // answers one call at a time, so no brokered rename moves them meanwhile.
  bool in_a_homes_bin(const WalkedPath& at, const std::vector<std::string>& relative) const {
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

  // Whether a folder from the workspace's root down to the target's is a Python environment's
  // root by its shape (workspace_rule.hpp's table).
  bool in_environment(const WalkedPath& at) const {
    for (size_t i = workspace_.size(); i < at.marked.size(); ++i)
      if (at.marked[i]) return true;
    return false;
  }

  // Depth first below `dir`; `found` gets each entry's components (and whether it is an
  // environment's marker or root: pyvenv.cfg, conda-meta, a folder of an environment's shape) and
  // stops the walk by returning true. A folder that cannot be opened or read sets `unreadable` and
  // stops it too.
  template <typename Found>
  bool scan(int dir, std::vector<std::string> inner, size_t& seen, bool& unreadable,
            Found&& found) {
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

  const BrokerSettings& settings_;
  const std::vector<std::string>& workspace_;
  const std::vector<std::vector<std::string>>& roots_;
  int root_;
  SandboxPaths paths_;
  pid_t pid_;
  LocatedFolders& located_;
  uint64_t generation_;
  std::function<void(BrokerRefusal)> refuse_;
};

}  // namespace

struct WorkspaceBroker::Remembered {
  LocatedFolders located;
  Umasks umasks;
  uint64_t buried = 0;  // files moved to the morgue: each one's name there
};

WorkspaceBroker::WorkspaceBroker(Fd listener, BrokerSettings settings, OnRefusal on_refusal)
    : listener_(std::move(listener)),
      settings_(std::move(settings)),
      remembered_(std::make_unique<Remembered>()),
      on_refusal_(std::move(on_refusal)) {
  workspace_parts_ = path_components(settings_.workspace);
  for (const auto& root : settings_.writable_roots)
    writable_roots_.push_back(path_components(root));
  // The lease the broker takes before removing a name (take_lease) signals its holder, the
  // warden, with SIGIO when another open breaks it in the moment it is held: SIGIO's default
  // would end the warden, and with it the session. The warden waits on no SIGIO of its own.
  if (settings_.guard_last_names) ::signal(SIGIO, SIG_IGN);
  stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_) throw_errno("eventfd");
  thread_ = std::thread([this] { serve(); });
  // Named before the warden says it is ready: the supervisor finds the thread by this name and
  // charges its CPU to the session (worker_process.cpp, kBrokerThreadName).
  ::pthread_setname_np(thread_.native_handle(), kBrokerThreadName);
}

WorkspaceBroker::~WorkspaceBroker() {
  uint64_t one = 1;
  ssize_t ignored = ::write(stop_.get(), &one, sizeof one);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
}

void WorkspaceBroker::refuse_once(BrokerRefusal refusal) {
  if (reported_.size() >= kMaxReported || !reported_.insert(refusal.path).second) return;
  on_refusal_(refusal);
}

void WorkspaceBroker::serve() {
  if (settings_.switch_ids) {
    // This thread alone (raw calls: glibc would change every thread's): the sandbox's host
    // identity for what it makes, and none of root's file capabilities, which a change of
    // fsuid away from 0 drops.
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 ||
        ::syscall(SYS_setfsgid, settings_.host_gid) < 0 ||
        ::syscall(SYS_setfsuid, settings_.host_uid) < 0) {
      listener_.reset();  // no listener: every brokered call fails (ENOSYS), none is made
      return;
    }
  }
  // A umask of this thread's own, for the unix sockets it binds for the caller (a container
  // profile may refuse unshare: the socket's mode is then set after the bind).
  own_umask_ = ::unshare(CLONE_FS) == 0;
  seccomp_notif_sizes sizes{};
  if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) {
    listener_.reset();
    return;
  }
  // Linux 6.6+: the caller and the broker hand the CPU to each other, as a pipe's two ends
  // would, rather than waking each other across CPUs (most of a brokered call's cost in a VM).
  // Best effort: older kernels answer EINVAL and wake as before.
  uint64_t sync_wake_up = kUserNotifFdSyncWakeUp;
  ::ioctl(listener_.get(), kIoctlNotifSetFlags, sync_wake_up);
  std::vector<unsigned char> buffer(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
  for (;;) {
    LocatedFolders& located = remembered_->located;
    pollfd fds[3] = {
        {listener_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}, {located.watch_fd(), POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (fds[2].revents && located.moved()) invalidate();  // before the call that came with it
    if (!(fds[0].revents & POLLIN)) {
      if (fds[0].revents & (POLLHUP | POLLERR)) return;  // no process is left under the filter
      continue;
    }
    std::memset(buffer.data(), 0, buffer.size());
    auto* request = reinterpret_cast<seccomp_notif*>(buffer.data());
    if (::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_RECV, request) != 0) {
      if (errno == EINTR || errno == ENOENT) continue;  // the caller went first
      return;
    }
    Call call;
    call.id = request->id;
    call.pid = static_cast<pid_t>(request->pid);
    call.nr = request->data.nr;
    std::memcpy(call.args, request->data.args, sizeof call.args);
    call.listener = listener_.get();
    answer(call);
    if (!call.answered) call.reply(EACCES);
  }
}

void WorkspaceBroker::answer(Call& call) {
  if (!root_) {
    root_.reset(::open(proc_path(call.pid, "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root_ || !call.still_waiting()) {
      root_.reset();
      return call.reply(EACCES);
    }
  }
  LocatedFolders& located = remembered_->located;
  Umasks& umasks = remembered_->umasks;
  Judge judge(settings_, workspace_parts_, writable_roots_, root_.get(), call.pid, located,
              generation_.load(),
              [this](BrokerRefusal refusal) { refuse_once(std::move(refusal)); });
  const pid_t pid = call.pid;
  auto dirfd_arg = [&](int i) { return call.arg_int(i); };
  // The caller's pid may have been reused once it went: every path read and descriptor opened
  // above is checked against the call still waiting before anything is changed.
  auto gone = [&] { return !call.still_waiting(); };

  // An opened file into the caller, as its open() returns it. What the broker opened without
  // blocking (a FIFO with no reader must not stall every other call) blocks again unless the
  // caller asked otherwise.
  auto hand_back = [&](int fd, int flags, bool opened_nonblocking) {
    if (opened_nonblocking && !(flags & O_NONBLOCK))
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    call.reply_fd(fd, (flags & O_CLOEXEC) != 0);
  };

  // /dev/stderr, /dev/fd/N, /proc/self/fd/N: the caller's own descriptor opened again, decided
  // on the object itself. The broker takes hold of what fd N is once (O_PATH), judges that
  // (Reopenable), and opens the very same object again through its own descriptor: a second
  // thread swapping fd N meanwhile changes nothing (it handed back a writable ~/.gitconfig).
  auto reopen = [&](const WalkedPath& at, int flags) {
    const auto& rest = at.rest_after_magic;
    bool own = at.where == std::vector<std::string>{"proc"} &&
               (at.name == "self" || at.name == "thread-self") && rest.size() == 2 &&
               rest[0] == "fd" && !rest[1].empty() &&
               rest[1].find_first_not_of("0123456789") == std::string::npos && rest[1].size() < 10;
    if (!own || (flags & kOTmpfileBit)) return call.reply(EACCES);
    Fd held(::open(proc_path(pid, "fd/" + rest[1]).c_str(), O_PATH | O_CLOEXEC));
    if (!held) return call.reply(errno == ENOENT ? EBADF : errno);
    if (gone()) return;
    struct stat st {};
    if (::fstat(held.get(), &st) != 0) return call.reply(errno);
    switch (reopenable(held.get(), st)) {
      case Reopenable::pipe:
        break;
      case Reopenable::socket:
        return call.reply(ENXIO);  // what the kernel says
      case Reopenable::by_name: {
        WalkedPath named;
        if (!judge.name_of(held.get(), named)) return call.reply(EACCES);
        bool writes = (flags & (O_WRONLY | O_RDWR | O_TRUNC)) != 0;
        if (writes || !judge.in_workspace(named))
          if (int error = judge.decide(named, Change::write)) return call.reply(error);
        break;
      }
      case Reopenable::refused:
        return call.reply(EACCES);
    }
    std::string same = "/proc/self/fd/" + std::to_string(held.get());
    Fd fd(::open(same.c_str(), (flags & ~(O_CREAT | O_EXCL | O_NOCTTY)) | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return call.reply(errno);
    hand_back(fd.get(), flags, true);
  };

  auto do_open = [&](int dirfd, uint64_t address, int flags, mode_t mode) {
    bool tmpfile = (flags & kOTmpfileBit) != 0;
    bool follow = !(flags & O_NOFOLLOW) && !((flags & O_CREAT) && (flags & O_EXCL));
    WalkedPath at;
    int resolved = judge.resolve(dirfd, address, follow || tmpfile, at);
    if (resolved == EXDEV && !at.name.empty()) return reopen(at, flags);
    if (resolved) return call.reply(resolved);
    if (gone()) return;
    if (at.name.empty()) return call.reply(EISDIR);
    if (at.dots_last && !tmpfile && (flags & O_CREAT)) return call.reply(EISDIR);
    if (mode & (S_ISUID | S_ISGID)) return call.reply(EPERM);
    struct stat st {};
    bool there = exists(at, st);
    bool writes = (flags & (O_WRONLY | O_RDWR | O_TRUNC)) != 0;
    if (!there && !(flags & (O_CREAT | kOTmpfileBit))) return call.reply(ENOENT);
    if (tmpfile) {
      if (judge.in_workspace(at)) return call.reply(EOPNOTSUPP);  // unnamed bytes, uncounted
      if (int error = judge.decide(at, Change::write)) return call.reply(error);
    } else if (there && !writes) {
      // O_CREAT on a file that is there: a read, which the workspace allows; elsewhere only
      // where the sandbox may write (Landlock's limits are not the broker's own)
      if (!judge.in_workspace(at))
        if (int error = judge.decide(at, Change::write)) return call.reply(error);
    } else if (int error = judge.decide(at, there ? Change::write : Change::create)) {
      return call.reply(error);
    }
    mode_t created = (flags & (O_CREAT | kOTmpfileBit)) ? (mode & 0777 & ~umasks.of(pid)) : 0;
    // What is there and is no regular file (a FIFO) is opened without blocking.
    bool special = there && !S_ISREG(st.st_mode);
    int open_flags = (flags | O_NOFOLLOW | O_CLOEXEC | (special ? O_NONBLOCK : 0)) & ~O_NOCTTY;
    // What was not there is made, not opened; if the host made the name meanwhile, what it
    // made is opened as the call asked, without blocking (it may be a FIFO).
    bool made = !there && !tmpfile;
    Fd fd(::openat(at.parent.get(), at.name.c_str(), open_flags | (made ? O_EXCL : 0), created));
    if (!fd && made && errno == EEXIST && !(flags & O_EXCL)) {
      special = true;
      fd.reset(::openat(at.parent.get(), at.name.c_str(), open_flags | O_NONBLOCK, created));
    }
    if (!fd) return call.reply(errno);
    if (!there && environment_marker(at.where.empty() ? "" : at.where.back(), at.name))
      invalidate();  // a folder may have become an environment
    hand_back(fd.get(), flags, special);
  };

  // A name that must not exist yet (mkdir, mknod, symlink): resolved, judged as `change`.
  // false when the call was answered (or its caller went) instead.
  auto new_name = [&](int dirfd, uint64_t address, Change change, WalkedPath& at) {
    if (int error = judge.resolve(dirfd, address, false, at)) return call.reply(error), false;
    if (gone()) return false;
    struct stat st {};
    if (at.name.empty() || exists(at, st)) return call.reply(EEXIST), false;
    if (int error = judge.decide(at, change)) return call.reply(error), false;
    return true;
  };

  auto do_mkdir = [&](int dirfd, uint64_t address, mode_t mode) {
    WalkedPath at;
    if (!new_name(dirfd, address, Change::make_folder, at)) return;
    mode_t made = mode & 0777 & ~umasks.of(pid);
    // In the workspace a folder is always its owner's to read and search: the quota's survey
    // must see into it.
    if (judge.in_workspace(at)) made |= S_IRWXU;
    int rc = ::mkdirat(at.parent.get(), at.name.c_str(), made);
    if (rc == 0 && environment_marker(at.where.empty() ? "" : at.where.back(), at.name))
      invalidate();  // a folder may have become an environment
    call.reply(rc == 0 ? 0 : errno);
  };

  auto do_mknod = [&](int dirfd, uint64_t address, mode_t mode) {
    if ((mode & S_IFMT) != 0 && (mode & S_IFMT) != S_IFREG) return call.reply(EPERM);
    if (mode & (S_ISUID | S_ISGID)) return call.reply(EPERM);
    WalkedPath at;
    if (!new_name(dirfd, address, Change::create, at)) return;
    Fd fd(::openat(at.parent.get(), at.name.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                   mode & 0777 & ~umasks.of(pid)));
    call.reply(fd ? 0 : errno);
  };

  // The write lease on what `at` names, on the object `st` described: the kernel grants it
  // only when no other open file description of the file exists (a writer, a reader, one in
  // flight in a unix socket, a mapping: measured on this host's Linux 6.18). 0 and `held` (the
  // lease lasts while it is open) when granted; else why not, which removal_of() treats as held.
  // Granted, the file's bytes are dropped before its name goes (drop_bytes): an O_PATH
  // descriptor or a reader that waited out the lease keeps only an empty inode.
  auto take_lease = [&](const WalkedPath& at, const struct stat& st, Fd& held) -> int {
    if (int error = take_removal_lease(at.parent.get(), at.name.c_str(), held)) return error;
    struct stat now {};
    if (::fstat(held.get(), &now) != 0) return errno;
    if (now.st_dev != st.st_dev || now.st_ino != st.st_ino || now.st_nlink != 1) return ESTALE;
    return 0;
  };

  // After a removal the lease allowed (`held` open): the bytes go, so what an O_PATH descriptor
  // or a reader that waited out the lease keeps is empty. Never before: a call that fails
  // changes nothing (the outside attack on round three emptied a file by a rename that failed).
  // After one that failed, the mode take_removal_lease may have given back as it was.
  auto settle = [&](bool removed, const WalkedPath& at, const struct stat& st, Fd& held) {
    if (!held) return;
    if (removed)
      (void)drop_bytes(held.get());
    else if (!(st.st_mode & S_IWUSR))
      (void)::fchmodat(at.parent.get(), at.name.c_str(), st.st_mode & 07777, 0);
  };

  // Whether the removal of what `at` names (a file `st` describes) must bury it instead, with
  // the lease held in `held` when it was granted (the name goes while the broker holds it).
  auto must_bury = [&](const WalkedPath& at, const struct stat& st, Fd& held) {
    if (!settings_.guard_last_names || !judge.in_workspace(at) ||
        !needs_lease(st.st_mode, st.st_nlink))
      return false;
    return removal_of(st.st_mode, st.st_nlink, take_lease(at, st, held)) == Removal::morgue;
  };

  // Moves what `at` names into the morgue, under a name of its own there (`buried`).
  auto bury = [&](const WalkedPath& at, std::string& buried) -> int {
    if (!settings_.morgue) return EBUSY;  // nowhere to keep it counted: the name stays
    buried = std::to_string(++remembered_->buried) + "-" + std::to_string(::getpid());
    long rc = ::syscall(SYS_renameat2, at.parent.get(), at.name.c_str(), settings_.morgue.get(),
                        buried.c_str(), RENAME_NOREPLACE);
    return rc == 0 ? 0 : errno;
  };

  auto do_unlink = [&](int dirfd, uint64_t address, int flags) {
    WalkedPath at;
    if (int error = judge.resolve(dirfd, address, false, at)) return call.reply(error);
    if (gone()) return;
    struct stat st {};
    if (at.name.empty()) return call.reply((flags & AT_REMOVEDIR) ? EBUSY : EISDIR);
    if (at.dots_last) return call.reply((flags & AT_REMOVEDIR) ? EINVAL : EISDIR);
    if (!exists(at, st)) return call.reply(ENOENT);
    if (int error = judge.decide(at, Change::remove)) return call.reply(error);
    Fd lease;
    std::string buried;
    int rc = 0;
    if (!(flags & AT_REMOVEDIR) && must_bury(at, st, lease)) {
      int error = bury(at, buried);  // fails closed: when not buried, not removed either
      if (error) settle(false, at, st, lease);
      errno = error;
      rc = error ? -1 : 0;
    } else {
      rc = ::unlinkat(at.parent.get(), at.name.c_str(), flags & AT_REMOVEDIR);
      int error = errno;
      settle(rc == 0, at, st, lease);
      errno = error;
    }
    if (rc == 0 && ((flags & AT_REMOVEDIR) ||
                    environment_marker(at.where.empty() ? "" : at.where.back(), at.name)))
      invalidate();
    call.reply(rc == 0 ? 0 : errno);
  };

  auto do_rename = [&](int olddir, uint64_t oldpath, int newdir, uint64_t newpath, unsigned flags) {
    if (flags & RENAME_WHITEOUT) return call.reply(EPERM);
    WalkedPath from, to;
    if (int error = judge.resolve(olddir, oldpath, false, from)) return call.reply(error);
    if (int error = judge.resolve(newdir, newpath, false, to)) return call.reply(error);
    if (gone()) return;
    if (from.name.empty() || to.name.empty() || from.dots_last || to.dots_last)
      return call.reply(EBUSY);
    struct stat st {};
    if (!exists(from, st)) return call.reply(ENOENT);
    if (int error = judge.decide(from, Change::rename)) return call.reply(error);
    if (int error = judge.decide(to, Change::rename)) return call.reply(error);
    if (int error = judge.decide_subtree(from, to)) return call.reply(error);
    if (int error = judge.decide_environment_by_rename(from, to)) return call.reply(error);
    if ((flags & RENAME_EXCHANGE)) {
      if (int error = judge.decide_subtree(to, from)) return call.reply(error);
      // Exchanged, each goes where the other was (a bin holding python* for an empty one).
      if (int error = judge.decide_environment_by_rename(to, from)) return call.reply(error);
    }
    // A rename over a file removes the target's name: as unlink does (must_bury).
    struct stat replaced {};
    Fd lease;
    std::string buried;
    // What the kernel would refuse by the two objects' kinds is refused before anything is
    // moved: a target buried first would let a folder take a file's place (no ENOTDIR).
    if (!(flags & RENAME_EXCHANGE) && exists(to, replaced) &&
        (replaced.st_dev != st.st_dev || replaced.st_ino != st.st_ino)) {
      if (S_ISDIR(st.st_mode) && !S_ISDIR(replaced.st_mode)) return call.reply(ENOTDIR);
      if (!S_ISDIR(st.st_mode) && S_ISDIR(replaced.st_mode)) return call.reply(EISDIR);
    }
    if (!(flags & (RENAME_EXCHANGE | RENAME_NOREPLACE)) && exists(to, replaced) &&
        (replaced.st_dev != st.st_dev || replaced.st_ino != st.st_ino) &&
        must_bury(to, replaced, lease))
      if (int error = bury(to, buried)) {
        settle(false, to, replaced, lease);
        return call.reply(error);
      }
    long rc = ::syscall(SYS_renameat2, from.parent.get(), from.name.c_str(), to.parent.get(),
                        to.name.c_str(), flags);
    int error = rc == 0 ? 0 : errno;
    if (buried.empty()) settle(rc == 0, to, replaced, lease);
    if (rc != 0 && !buried.empty()) {  // the target back where it was: nothing changed
      ::syscall(SYS_renameat2, settings_.morgue.get(), buried.c_str(), to.parent.get(),
                to.name.c_str(), RENAME_NOREPLACE);
      settle(false, to, replaced, lease);  // its mode too
    }
    if (rc == 0) invalidate();  // a folder's path changed, or a marker came or went
    call.reply(error);
  };

  auto do_symlink = [&](uint64_t target_address, int dirfd, uint64_t address) {
    std::string target;
    if (int error = read_string(pid, target_address, target)) return call.reply(error);
    if (target.empty()) return call.reply(ENOENT);
    WalkedPath at;
    if (!new_name(dirfd, address, Change::create, at)) return;
    if (auto relative = judge.in_workspace(at)) {
      // A link in the workspace is one a host tool may write through: it may only lead to an
      // ordinary place in the workspace, resolved from where it stands.
      WalkedPath points;
      SandboxPaths paths(root_.get());
      int error = paths.walk(at.where, target, true, points);
      auto target_rel = error ? std::nullopt : judge.in_workspace(points);
      if (!target_rel || target_rel->empty()) {
        refuse_once({joined(*relative), "link", "a link that leads out of the workspace"});
        return call.reply(EACCES);
      }
      if (int refused = judge.decide(points, Change::link)) return call.reply(refused);
    }
    call.reply(::symlinkat(target.c_str(), at.parent.get(), at.name.c_str()) == 0 ? 0 : errno);
  };

  // The times utime*() asked for, read once from the caller's memory (none: now).
  timespec times[2] = {};
  bool times_now = false;

  // A mode, an owner or times changed on `at` (a file or folder `st` describes): judged, then
  // made without following a final link.
  auto change_attributes = [&](const WalkedPath& at, const struct stat& st, Change change,
                               uint64_t a, uint64_t b) {
    if (int error = judge.decide(at, change)) return call.reply(error);
    if (change == Change::times)
      return call.reply(::utimensat(at.parent.get(), at.name.c_str(), times_now ? nullptr : times,
                                    AT_SYMLINK_NOFOLLOW) == 0
                            ? 0
                            : errno);
    if (change == Change::mode) {
      mode_t mode = static_cast<mode_t>(a) & 07777;
      if (mode & (S_ISUID | S_ISGID)) return call.reply(EPERM);
      if (S_ISDIR(st.st_mode) && judge.in_workspace(at) &&
          (mode & (S_IRUSR | S_IXUSR)) != (S_IRUSR | S_IXUSR)) {
        refuse_once({joined(*judge.in_workspace(at)), "mode",
                     "a folder its owner could not read (the quota counts every folder)"});
        return call.reply(EPERM);
      }
      long rc =
          ::syscall(kSysFchmodat2, at.parent.get(), at.name.c_str(), mode, AT_SYMLINK_NOFOLLOW);
      if (rc != 0 && errno == ENOSYS && !S_ISLNK(st.st_mode))
        rc = ::fchmodat(at.parent.get(), at.name.c_str(), mode, 0);
      return call.reply(rc == 0 ? 0 : errno);
    }
    // Only to the ids the worker has (-1: unchanged), as the host sees them.
    auto host_id = [](uint64_t id, uint32_t inside, uint32_t host, uint32_t& out) {
      uint32_t value = static_cast<uint32_t>(id);
      if (value == static_cast<uint32_t>(-1) || value == inside) {
        out = value == inside ? host : value;
        return true;
      }
      return false;
    };
    uint32_t uid = 0, gid = 0;
    if (!host_id(a, settings_.sandbox_uid, settings_.host_uid, uid) ||
        !host_id(b, settings_.sandbox_gid, settings_.host_gid, gid))
      return call.reply(EPERM);
    call.reply(::fchownat(at.parent.get(), at.name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) == 0
                   ? 0
                   : errno);
  };

  // chmod and chown by path; `nofollow` for AT_SYMLINK_NOFOLLOW and lchown.
  auto do_attr = [&](int dirfd, uint64_t address, bool nofollow, Change change, uint64_t a,
                     uint64_t b) {
    WalkedPath at;
    if (int error = judge.resolve(dirfd, address, !nofollow, at)) return call.reply(error);
    if (gone()) return;
    struct stat st {};
    if (at.name.empty()) return call.reply(outside_roots(at.parent.get()));  // the root
    if (::fstatat(at.parent.get(), at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return call.reply(errno);
    change_attributes(at, st, change, a, b);
  };

  // fchmod and fchown: the descriptor's object, named by /proc/self/fd's text and walked back
  // to the very same object. A pipe's or a socket's mode is no name's, and nothing but files
  // and folders is the worker's to change.
  auto do_fattr = [&](int fd_number, Change change, uint64_t a, uint64_t b) {
    Fd object(
        ::open(proc_path(pid, "fd/" + std::to_string(fd_number)).c_str(), O_PATH | O_CLOEXEC));
    if (!object) return call.reply(EBADF);
    if (gone()) return;
    struct stat st {};
    if (::fstat(object.get(), &st) != 0) return call.reply(errno);
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return call.reply(EPERM);
    WalkedPath at;
    if (!judge.name_of(object.get(), at)) return call.reply(EACCES);
    change_attributes(at, st, change, a, b);
  };

  // utime, utimes, futimesat, utimensat: the times are read once into `times` (timevals and
  // utimbuf's seconds made timespecs; the kernel checks the values when the broker makes the
  // change), then judged like a mode: by path, or on a descriptor's own object (futimens, a
  // NULL path or AT_EMPTY_PATH).
  enum class TimesShape { utimbuf, timevals, timespecs };
  auto read_times = [&](uint64_t address, TimesShape shape) {
    times_now = address == 0;
    if (times_now) return 0;
    if (shape == TimesShape::timespecs) {
      ssize_t got = read_memory(pid, address, reinterpret_cast<char*>(times), sizeof times);
      return got == static_cast<ssize_t>(sizeof times) ? 0 : EFAULT;
    }
    int64_t raw[4] = {};  // two timevals, or utimbuf's two times (then only raw[0], raw[1])
    size_t want = shape == TimesShape::timevals ? sizeof raw : 2 * sizeof(int64_t);
    if (read_memory(pid, address, reinterpret_cast<char*>(raw), want) != static_cast<ssize_t>(want))
      return EFAULT;
    if (shape == TimesShape::utimbuf) {
      times[0] = {raw[0], 0};
      times[1] = {raw[1], 0};
      return 0;
    }
    for (int i = 0; i < 2; ++i) {
      if (raw[2 * i + 1] < 0 || raw[2 * i + 1] >= 1000000) return EINVAL;
      times[i] = {raw[2 * i], raw[2 * i + 1] * 1000};
    }
    return 0;
  };
  auto do_times = [&](int dirfd, uint64_t address, uint64_t times_address, TimesShape shape,
                      int flags) {
    if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)) return call.reply(EINVAL);
    if (int error = read_times(times_address, shape)) return call.reply(error);
    bool own_object = address == 0 && dirfd != AT_FDCWD;
    if (address == 0 && !own_object) return call.reply(EFAULT);
    if (own_object && flags) return call.reply(EINVAL);
    if (!own_object && (flags & AT_EMPTY_PATH)) {
      std::string path;
      if (int error = read_string(pid, address, path)) return call.reply(error);
      own_object = path.empty();
    }
    if (own_object) {
      if (dirfd == AT_FDCWD) return call.reply(EACCES);  // the cwd's own times: not needed
      return do_fattr(dirfd, Change::times, 0, 0);
    }
    do_attr(dirfd, address, flags & AT_SYMLINK_NOFOLLOW, Change::times, 0, 0);
  };

  // bind(): a unix socket's path is a name like any other. The address lives in the caller's
  // memory, so every bind is made here, on the caller's own socket (pidfd_getfd): letting the
  // call run would read the address again, after the check.
  auto do_bind = [&](int fd_number, uint64_t address, uint64_t length) {
    if (length < sizeof(sa_family_t) || length > sizeof(sockaddr_storage))
      return call.reply(EINVAL);
    sockaddr_storage asked{};
    ssize_t got = read_memory(pid, address, reinterpret_cast<char*>(&asked), length);
    if (got != static_cast<ssize_t>(length)) return call.reply(EFAULT);
    Fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, kPidfdThread)));
    if (!pidfd) pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, tgid_of(pid), 0)));
    Fd socket(pidfd ? static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), fd_number, 0)) : -1);
    if (!socket) return call.reply(errno == EBADF ? EBADF : EACCES);
    if (gone()) return;
    const auto family = asked.ss_family;
    constexpr size_t kPathAt = offsetof(sockaddr_un, sun_path);
    const auto* un = reinterpret_cast<const sockaddr_un*>(&asked);
    if (family == AF_UNIX && length > kPathAt && un->sun_path[0] != '\0') {
      std::string path(un->sun_path, ::strnlen(un->sun_path, length - kPathAt));
      WalkedPath at;
      if (int error = judge.resolve_text(AT_FDCWD, path, false, at)) return call.reply(error);
      struct stat st {};
      if (at.name.empty() || exists(at, st)) return call.reply(EADDRINUSE);
      if (int error = judge.decide(at, Change::create)) return call.reply(error);
      // Bound through the folder's descriptor, as the caller's own umask would make it.
      std::string through = "/proc/self/fd/" + std::to_string(at.parent.get()) + "/" + at.name;
      sockaddr_un here{};
      here.sun_family = AF_UNIX;
      if (through.size() >= sizeof here.sun_path) return call.reply(ENAMETOOLONG);
      std::memcpy(here.sun_path, through.c_str(), through.size() + 1);
      mode_t mask = umasks.of(pid);
      if (own_umask_) ::umask(mask);
      int rc = ::bind(socket.get(), reinterpret_cast<sockaddr*>(&here), sizeof here);
      if (rc == 0 && !own_umask_) ::fchmodat(at.parent.get(), at.name.c_str(), 0777 & ~mask, 0);
      return call.reply(rc == 0 ? 0 : errno);
    }
    if (family == AF_INET || family == AF_INET6) {
      // The warden holds capabilities over the sandbox's network namespace; the worker not.
      uint16_t port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&asked)->sin_port
                                              : reinterpret_cast<sockaddr_in6*>(&asked)->sin6_port);
      if (port != 0 && port < 1024) return call.reply(EACCES);
    }
    int rc =
        ::bind(socket.get(), reinterpret_cast<sockaddr*>(&asked), static_cast<socklen_t>(length));
    call.reply(rc == 0 ? 0 : errno);
  };

  auto do_truncate = [&](uint64_t address, int64_t length) {
    if (length < 0) return call.reply(EINVAL);
    WalkedPath at;
    if (int error = judge.resolve(AT_FDCWD, address, true, at)) return call.reply(error);
    if (gone()) return;
    if (at.name.empty()) return call.reply(EISDIR);
    struct stat st {};
    if (!exists(at, st)) return call.reply(ENOENT);
    if (int error = judge.decide(at, Change::write)) return call.reply(error);
    Fd fd(
        ::openat(at.parent.get(), at.name.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return call.reply(errno);
    call.reply(::ftruncate(fd.get(), length) == 0 ? 0 : errno);
  };

  const uint64_t* a = call.args;
  switch (call.nr) {
    case SYS_open:
      return do_open(AT_FDCWD, a[0], call.arg_int(1), static_cast<mode_t>(a[2]));
    case SYS_openat:
      return do_open(dirfd_arg(0), a[1], call.arg_int(2), static_cast<mode_t>(a[3]));
    case SYS_creat:
      return do_open(AT_FDCWD, a[0], O_CREAT | O_WRONLY | O_TRUNC, static_cast<mode_t>(a[1]));
    case SYS_mkdir:
      return do_mkdir(AT_FDCWD, a[0], static_cast<mode_t>(a[1]));
    case SYS_mkdirat:
      return do_mkdir(dirfd_arg(0), a[1], static_cast<mode_t>(a[2]));
    case SYS_mknod:
      return do_mknod(AT_FDCWD, a[0], static_cast<mode_t>(a[1]));
    case SYS_mknodat:
      return do_mknod(dirfd_arg(0), a[1], static_cast<mode_t>(a[2]));
    case SYS_unlink:
      return do_unlink(AT_FDCWD, a[0], 0);
    case SYS_rmdir:
      return do_unlink(AT_FDCWD, a[0], AT_REMOVEDIR);
    case SYS_unlinkat:
      if (call.arg_int(2) & ~AT_REMOVEDIR) return call.reply(EINVAL);
      return do_unlink(dirfd_arg(0), a[1], call.arg_int(2));
    case SYS_rename:
      return do_rename(AT_FDCWD, a[0], AT_FDCWD, a[1], 0);
    case SYS_renameat:
      return do_rename(dirfd_arg(0), a[1], dirfd_arg(2), a[3], 0);
    case SYS_renameat2:
      return do_rename(dirfd_arg(0), a[1], dirfd_arg(2), a[3], static_cast<unsigned>(a[4]));
    case SYS_symlink:
      return do_symlink(a[0], AT_FDCWD, a[1]);
    case SYS_symlinkat:
      return do_symlink(a[0], dirfd_arg(1), a[2]);
    case SYS_chmod:
      return do_attr(AT_FDCWD, a[0], false, Change::mode, a[1], 0);
    case SYS_fchmodat:
      return do_attr(dirfd_arg(0), a[1], false, Change::mode, a[2], 0);
    case kSysFchmodat2:
      if (call.arg_int(3) & ~AT_SYMLINK_NOFOLLOW) return call.reply(EINVAL);
      return do_attr(dirfd_arg(0), a[1], call.arg_int(3) & AT_SYMLINK_NOFOLLOW, Change::mode, a[2],
                     0);
    case SYS_fchmod:
      return do_fattr(call.arg_int(0), Change::mode, a[1], 0);
    case SYS_chown:
      return do_attr(AT_FDCWD, a[0], false, Change::owner, a[1], a[2]);
    case SYS_lchown:
      return do_attr(AT_FDCWD, a[0], true, Change::owner, a[1], a[2]);
    case SYS_fchownat:
      if (call.arg_int(4) & AT_EMPTY_PATH) return do_fattr(dirfd_arg(0), Change::owner, a[2], a[3]);
      return do_attr(dirfd_arg(0), a[1], call.arg_int(4) & AT_SYMLINK_NOFOLLOW, Change::owner, a[2],
                     a[3]);
    case SYS_fchown:
      return do_fattr(call.arg_int(0), Change::owner, a[1], a[2]);
    case SYS_truncate:
      return do_truncate(a[0], static_cast<int64_t>(a[1]));
    case SYS_utime:
      return do_times(AT_FDCWD, a[0], a[1], TimesShape::utimbuf, 0);
    case SYS_utimes:
      return do_times(AT_FDCWD, a[0], a[1], TimesShape::timevals, 0);
    case SYS_futimesat:
      return do_times(dirfd_arg(0), a[1], a[2], TimesShape::timevals, 0);
    case SYS_utimensat:
      return do_times(dirfd_arg(0), a[1], a[2], TimesShape::timespecs, call.arg_int(3));
    case SYS_bind:
      return do_bind(call.arg_int(0), a[1], a[2]);
    case SYS_umask:
      // Its argument is a register, not memory: letting it run is safe.
      umasks.changing();
      return call.let_run();
    default:
      return call.reply(ENOSYS);
  }
}

}  // namespace belljar
