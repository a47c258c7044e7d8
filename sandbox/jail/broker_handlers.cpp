#include "sandbox/jail/broker_handlers.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/path_parts.hpp"
#include "sandbox/os/small_file.hpp"

namespace belljar {

mode_t Umasks::of(pid_t tid) {
  if (caching_ && known_) return *known_;
  std::string status = read_small_file(proc_path(tid, "status"));
  auto at = status.find("\nUmask:\t");
  if (at == std::string::npos) return 077;  // unknown: the strictest
  mode_t mask = static_cast<mode_t>(std::strtoul(status.c_str() + at + 8, nullptr, 8) & 0777);
  if (caching_) known_ = mask;
  return mask;
}

BrokerAnswer::BrokerAnswer(BrokerCall& call, const BrokerScene& scene, BrokerMemory& memory,
                           std::atomic<uint64_t>& generation, const MountChanges& mount_changes,
                           WorkspaceJudge::Refuse refuse)
    : call(call),
      scene(scene),
      memory(memory),
      judge(
          scene.settings.rule, scene.workspace, scene.roots, scene.root, std::move(refuse),
          [this] { return current_mounts(); }, scene.settings.links_by_name, scene.held),
      generation_(generation),
      mount_changes_(mount_changes),
      seen_generation_(generation.load()),
      paths_(scene.root, &holds_host_run_folder, scene.workspace.size()) {}

namespace {

// Components as an absolute path ("/" for none).
std::string absolute(const std::vector<std::string>& parts) {
  std::string text;
  for (const auto& part : parts) text += "/" + part;
  return text.empty() ? "/" : text;
}

}  // namespace

int BrokerAnswer::resolve(int dirfd, uint64_t address, bool follow_last, WalkedPath& out) {
  std::string path;
  if (int error = read_string(call.pid, address, path)) return error;
  return resolve_text(dirfd, path, follow_last, out);
}

int BrokerAnswer::resolve_text(int dirfd, const std::string& path, bool follow_last,
                               WalkedPath& out) {
  if (path.empty()) return ENOENT;
  LocatedFolders& located = memory.located;
  const WalkStart* start = nullptr;
  static const WalkStart kRoot;
  if (path[0] != '/') {
    std::string base = dirfd == AT_FDCWD ? "cwd" : "fd/" + std::to_string(dirfd);
    Fd dir(::open(proc_path(call.pid, base).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return errno == ENOTDIR ? ENOTDIR : dirfd == AT_FDCWD ? ENOENT : EBADF;
    start = located.find(paths_, scene.root, dir.get(), seen_generation_);
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
    if (const WalkStart* known = located.by_path(folder, seen_generation_))
      return paths_.walk(*known, parts.back(), follow_last, out);
  }
  int error = paths_.walk(start ? *start : kRoot, path, follow_last, out);
  if (error == 0 && plain && absolute(out.where) == folder)
    located.remember(scene.root, out, folder, seen_generation_);
  return error;
}

const SandboxMounts* BrokerAnswer::current_mounts() {
  auto stamp = mount_changes_.stamp();
  SandboxMounts& mounts = memory.mounts;
  if (mounts.current(stamp)) return &mounts;
  // The caller's own view: the pid is the caller's while it waits, checked after the read.
  if (!mounts.read(call.pid, stamp) || gone()) return nullptr;
  return &mounts;
}

bool BrokerAnswer::name_of(int held, WalkedPath& at) const {
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

namespace {

constexpr int kOTmpfileBit = 020000000;
constexpr unsigned kPidfdThread = O_EXCL;  // PIDFD_THREAD, Linux 6.9
constexpr long kSysFchmodat2 = 452;        // Linux 6.6, newer than some headers
constexpr long kPipefsMagic = 0x50495045;  // PIPEFS_MAGIC

// The call's argument `i` as the descriptor it names (AT_FDCWD included).
int dirfd_arg(const BrokerAnswer& answer, int i) {
  return answer.call.arg_int(i);
}
uint64_t arg(const BrokerAnswer& answer, int i) {
  return answer.call.args[i];
}
mode_t mode_arg(const BrokerAnswer& answer, int i) {
  return static_cast<mode_t>(arg(answer, i));
}

// The folder a walk ended at names the parent of what it asked for ("a/.."): no new name there.
std::string parent_name(const WalkedPath& at) {
  return at.where.empty() ? "" : at.where.back();
}

// Whether the walk's last name is there (its lstat in `st`), as the walk saw it a moment ago
// when it looked; what changes it since is made with O_EXCL or fails on its own.
bool exists(const WalkedPath& at, struct stat& st) {
  if (at.seen == WalkedPath::Seen::there) st = at.seen_stat;
  if (at.seen != WalkedPath::Seen::unseen) return at.seen == WalkedPath::Seen::there;
  return ::fstatat(at.parent.get(), at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// The thread group a thread belongs to (pidfd_open takes only a group's leader before 6.9).
pid_t tgid_of(pid_t tid) {
  std::string status = read_small_file(proc_path(tid, "status"));
  auto at = status.find("\nTgid:\t");
  return at == std::string::npos
             ? tid
             : static_cast<pid_t>(std::strtol(status.c_str() + at + 7, nullptr, 10));
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

// An opened file into the caller, as its open() returns it. What the broker opened without
// blocking (a FIFO with no reader must not stall every other call) blocks again unless the
// caller asked otherwise.
void hand_back(BrokerAnswer& answer, int fd, int flags, bool opened_nonblocking) {
  if (opened_nonblocking && !(flags & O_NONBLOCK))
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  answer.call.reply_fd(fd, (flags & O_CLOEXEC) != 0);
}

// /dev/stderr, /dev/fd/N, /proc/self/fd/N: the caller's own descriptor opened again, decided
// on the object itself. The broker takes hold of what fd N is once (O_PATH), judges that
// (Reopenable), and opens the very same object again through its own descriptor: a second
// thread swapping fd N meanwhile changes nothing (it handed back a writable ~/.gitconfig).
void reopen(BrokerAnswer& answer, const WalkedPath& at, int flags) {
  BrokerCall& call = answer.call;
  const auto& rest = at.rest_after_magic;
  bool own = at.where == std::vector<std::string>{"proc"} &&
             (at.name == "self" || at.name == "thread-self") && rest.size() == 2 &&
             rest[0] == "fd" && !rest[1].empty() &&
             rest[1].find_first_not_of("0123456789") == std::string::npos && rest[1].size() < 10;
  if (!own || (flags & kOTmpfileBit)) return call.reply(EACCES);
  Fd held(::open(proc_path(call.pid, "fd/" + rest[1]).c_str(), O_PATH | O_CLOEXEC));
  if (!held) return call.reply(errno == ENOENT ? EBADF : errno);
  if (answer.gone()) return;
  struct stat st {};
  if (::fstat(held.get(), &st) != 0) return call.reply(errno);
  switch (reopenable(held.get(), st)) {
    case Reopenable::pipe:
      break;
    case Reopenable::socket:
      return call.reply(ENXIO);  // what the kernel says
    case Reopenable::by_name: {
      WalkedPath named;
      if (!answer.name_of(held.get(), named)) return call.reply(EACCES);
      bool writes = (flags & (O_WRONLY | O_RDWR | O_TRUNC)) != 0;
      if (writes || !answer.judge.in_workspace(named))
        if (int error = answer.judge.decide(named, Change::write)) return call.reply(error);
      break;
    }
    case Reopenable::refused:
      return call.reply(EACCES);
  }
  std::string same = "/proc/self/fd/" + std::to_string(held.get());
  Fd fd(::open(same.c_str(), (flags & ~(O_CREAT | O_EXCL | O_NOCTTY)) | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return call.reply(errno);
  hand_back(answer, fd.get(), flags, true);
}

// What an open of `at` (`there`: it exists) asks of the judge: 0 when it may go on.
int judge_open(BrokerAnswer& answer, const WalkedPath& at, int flags, bool there) {
  WorkspaceJudge& judge = answer.judge;
  bool tmpfile = (flags & kOTmpfileBit) != 0;
  bool writes = (flags & (O_WRONLY | O_RDWR | O_TRUNC)) != 0;
  if (tmpfile) {
    if (judge.in_workspace(at)) return EOPNOTSUPP;  // unnamed bytes, uncounted
    return judge.decide(at, Change::write);
  }
  if (there && !writes) {
    // O_CREAT on a file that is there: a read, which the workspace allows; elsewhere only
    // where the sandbox may write (Landlock's limits are not the broker's own)
    return judge.in_workspace(at) ? 0 : judge.decide(at, Change::write);
  }
  return judge.decide(at, there ? Change::write : Change::create);
}

void open_name(BrokerAnswer& answer, int dirfd, uint64_t address, int flags, mode_t mode) {
  BrokerCall& call = answer.call;
  bool tmpfile = (flags & kOTmpfileBit) != 0;
  bool follow = !(flags & O_NOFOLLOW) && !((flags & O_CREAT) && (flags & O_EXCL));
  WalkedPath at;
  int resolved = answer.resolve(dirfd, address, follow || tmpfile, at);
  if (resolved == EXDEV && !at.name.empty()) return reopen(answer, at, flags);
  if (resolved) return call.reply(resolved);
  if (answer.gone()) return;
  if (at.name.empty()) return call.reply(EISDIR);
  if (at.dots_last && !tmpfile && (flags & O_CREAT)) return call.reply(EISDIR);
  if (mode & (S_ISUID | S_ISGID)) return call.reply(EPERM);
  struct stat st {};
  bool there = exists(at, st);
  if (!there && !(flags & (O_CREAT | kOTmpfileBit))) return call.reply(ENOENT);
  if (int error = judge_open(answer, at, flags, there)) return call.reply(error);
  mode_t created =
      (flags & (O_CREAT | kOTmpfileBit)) ? (mode & 0777 & ~answer.memory.umasks.of(call.pid)) : 0;
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
  if (!there && environment_marker(parent_name(at), at.name))
    answer.invalidate();  // a folder may have become an environment
  hand_back(answer, fd.get(), flags, special);
}

// A name that must not exist yet (mkdir, mknod, symlink): resolved, judged as `change`.
// false when the call was answered (or its caller went) instead.
bool new_name(BrokerAnswer& answer, int dirfd, uint64_t address, Change change, WalkedPath& at) {
  BrokerCall& call = answer.call;
  if (int error = answer.resolve(dirfd, address, false, at)) return call.reply(error), false;
  if (answer.gone()) return false;
  struct stat st {};
  if (at.name.empty() || exists(at, st)) return call.reply(EEXIST), false;
  if (int error = answer.judge.decide(at, change)) return call.reply(error), false;
  return true;
}

void make_folder(BrokerAnswer& answer, int dirfd, uint64_t address, mode_t mode) {
  WalkedPath at;
  if (!new_name(answer, dirfd, address, Change::make_folder, at)) return;
  mode_t made = mode & 0777 & ~answer.memory.umasks.of(answer.call.pid);
  // In the workspace a folder is always its owner's to read and search: the quota's survey
  // must see into it.
  if (answer.judge.in_workspace(at)) made |= S_IRWXU;
  int rc = ::mkdirat(at.parent.get(), at.name.c_str(), made);
  if (rc == 0 && environment_marker(parent_name(at), at.name))
    answer.invalidate();  // a folder may have become an environment
  answer.call.reply(rc == 0 ? 0 : errno);
}

void make_node(BrokerAnswer& answer, int dirfd, uint64_t address, mode_t mode) {
  BrokerCall& call = answer.call;
  if ((mode & S_IFMT) != 0 && (mode & S_IFMT) != S_IFREG) return call.reply(EPERM);
  if (mode & (S_ISUID | S_ISGID)) return call.reply(EPERM);
  WalkedPath at;
  if (!new_name(answer, dirfd, address, Change::create, at)) return;
  Fd fd(::openat(at.parent.get(), at.name.c_str(),
                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                 mode & 0777 & ~answer.memory.umasks.of(call.pid)));
  call.reply(fd ? 0 : errno);
}

// A regular file's last name removed (unlink, or a rename over it) while another open file
// description of it remains would leave bytes no survey counts: the lease, the morgue.
class LastName {
 public:
  LastName(BrokerAnswer& answer, const WalkedPath& at, const struct stat& st)
      : answer_(answer), at_(at), st_(st) {}

  // Whether the removal must bury the file instead, with the lease held when it was granted
  // (the name goes while the broker holds it).
  bool must_bury() {
    const BrokerSettings& settings = answer_.scene.settings;
    if (!settings.guard_last_names || !answer_.judge.in_workspace(at_) ||
        !needs_lease(st_.st_mode, st_.st_nlink))
      return false;
    return removal_of(st_.st_mode, st_.st_nlink, take_lease()) == Removal::morgue;
  }

  // Moves the file into the morgue, under a name of its own there.
  int bury() {
    const Fd& morgue = answer_.scene.settings.morgue;
    if (!morgue) return EBUSY;  // nowhere to keep it counted: the name stays
    buried_ = std::to_string(++answer_.memory.buried) + "-" + std::to_string(::getpid());
    long rc = ::syscall(SYS_renameat2, at_.parent.get(), at_.name.c_str(), morgue.get(),
                        buried_.c_str(), RENAME_NOREPLACE);
    return rc == 0 ? 0 : errno;
  }
  bool buried() const { return !buried_.empty(); }

  // A buried file back where it was, after the call that was to replace it failed.
  void unbury() {
    ::syscall(SYS_renameat2, answer_.scene.settings.morgue.get(), buried_.c_str(), at_.parent.get(),
              at_.name.c_str(), RENAME_NOREPLACE);
  }

  // After a removal the lease allowed: the bytes go, so what an O_PATH descriptor or a reader
  // that waited out the lease keeps is empty. Never before: a call that fails changes nothing
  // (the outside attack on round three emptied a file by a rename that failed). After one that
  // failed, the mode take_removal_lease may have given back as it was.
  void settle(bool removed) {
    if (!held_) return;
    if (removed)
      (void)drop_bytes(held_.get());
    else if (!(st_.st_mode & S_IWUSR))
      (void)::fchmodat(at_.parent.get(), at_.name.c_str(), st_.st_mode & 07777, 0);
  }

 private:
  // The write lease on the object `st_` described: the kernel grants it only when no other
  // open file description of the file exists (a writer, a reader, one in flight in a unix
  // socket, a mapping: measured on this host's Linux 6.18). 0 when granted (the lease lasts
  // while held_ is open); else why not, which removal_of() treats as held.
  int take_lease() {
    if (int error = take_removal_lease(at_.parent.get(), at_.name.c_str(), held_)) return error;
    struct stat now {};
    if (::fstat(held_.get(), &now) != 0) return errno;
    if (now.st_dev != st_.st_dev || now.st_ino != st_.st_ino || now.st_nlink != 1) return ESTALE;
    return 0;
  }

  BrokerAnswer& answer_;
  const WalkedPath& at_;
  const struct stat& st_;
  Fd held_;
  std::string buried_;
};

void remove_name(BrokerAnswer& answer, int dirfd, uint64_t address, int flags) {
  BrokerCall& call = answer.call;
  WalkedPath at;
  if (int error = answer.resolve(dirfd, address, false, at)) return call.reply(error);
  if (answer.gone()) return;
  struct stat st {};
  if (at.name.empty()) return call.reply((flags & AT_REMOVEDIR) ? EBUSY : EISDIR);
  if (at.dots_last) return call.reply((flags & AT_REMOVEDIR) ? EINVAL : EISDIR);
  if (!exists(at, st)) return call.reply(ENOENT);
  if (int error = answer.judge.decide(at, Change::remove)) return call.reply(error);
  LastName last(answer, at, st);
  int rc = 0;
  if (!(flags & AT_REMOVEDIR) && last.must_bury()) {
    int error = last.bury();  // fails closed: when not buried, not removed either
    if (error) last.settle(false);
    errno = error;
    rc = error ? -1 : 0;
  } else {
    rc = ::unlinkat(at.parent.get(), at.name.c_str(), flags & AT_REMOVEDIR);
    int error = errno;
    last.settle(rc == 0);
    errno = error;
  }
  if (rc == 0 && ((flags & AT_REMOVEDIR) || environment_marker(parent_name(at), at.name)))
    answer.invalidate();
  call.reply(rc == 0 ? 0 : errno);
}

bool same_object(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void rename_name(BrokerAnswer& answer, int olddir, uint64_t oldpath, int newdir, uint64_t newpath,
                 unsigned flags) {
  BrokerCall& call = answer.call;
  if (flags & RENAME_WHITEOUT) return call.reply(EPERM);
  WalkedPath from, to;
  if (int error = answer.resolve(olddir, oldpath, false, from)) return call.reply(error);
  if (int error = answer.resolve(newdir, newpath, false, to)) return call.reply(error);
  if (answer.gone()) return;
  if (from.name.empty() || to.name.empty() || from.dots_last || to.dots_last)
    return call.reply(EBUSY);
  struct stat st {};
  if (!exists(from, st)) return call.reply(ENOENT);
  if (int error = answer.judge.decide_rename(from, to, flags)) return call.reply(error);
  // A rename over a file removes the target's name: as unlink does (LastName).
  struct stat replaced {};
  bool replacing = !(flags & RENAME_EXCHANGE) && exists(to, replaced) && !same_object(replaced, st);
  if (replacing)
    if (int error = WorkspaceJudge::replacement_refusal(st, replaced)) return call.reply(error);
  LastName last(answer, to, replaced);
  if (replacing && !(flags & RENAME_NOREPLACE) && last.must_bury())
    if (int error = last.bury()) {
      last.settle(false);
      return call.reply(error);
    }
  long rc = ::syscall(SYS_renameat2, from.parent.get(), from.name.c_str(), to.parent.get(),
                      to.name.c_str(), flags);
  int error = rc == 0 ? 0 : errno;
  if (!last.buried()) last.settle(rc == 0);
  if (rc != 0 && last.buried()) {  // the target back where it was: nothing changed
    last.unbury();
    last.settle(false);  // its mode too
  }
  if (rc == 0) answer.invalidate();  // a folder's path changed, or a marker came or went
  call.reply(error);
}

void make_symlink(BrokerAnswer& answer, uint64_t target_address, int dirfd, uint64_t address) {
  BrokerCall& call = answer.call;
  std::string target;
  if (int error = read_string(call.pid, target_address, target)) return call.reply(error);
  if (target.empty()) return call.reply(ENOENT);
  WalkedPath at;
  if (!new_name(answer, dirfd, address, Change::create, at)) return;
  if (int refused = answer.judge.decide_link(at, target)) return call.reply(refused);
  call.reply(::symlinkat(target.c_str(), at.parent.get(), at.name.c_str()) == 0 ? 0 : errno);
}

// The times utime*() asked for, read once from the caller's memory (`now`: none given).
struct Times {
  timespec at[2] = {};
  bool now = false;
};

// What a mode, owner or times change carries: the new mode, the owner's two ids, or the times.
struct Attributes {
  Change change;
  uint64_t a = 0, b = 0;  // mode; or uid, gid
  const Times* times = nullptr;
};

// Only to the ids the worker has (-1: unchanged), as the host sees them.
bool host_id(uint64_t id, uint32_t inside, uint32_t host, uint32_t& out) {
  uint32_t value = static_cast<uint32_t>(id);
  if (value == static_cast<uint32_t>(-1) || value == inside) {
    out = value == inside ? host : value;
    return true;
  }
  return false;
}

// A mode, an owner or times changed on `at` (a file or folder `st` describes): judged, then
// made without following a final link.
void change_attributes(BrokerAnswer& answer, const WalkedPath& at, const struct stat& st,
                       const Attributes& change) {
  BrokerCall& call = answer.call;
  int dir = at.parent.get();
  const char* name = at.name.c_str();
  if (change.change == Change::mode) {
    mode_t mode = static_cast<mode_t>(change.a) & 07777;
    if (int error = answer.judge.decide_mode(at, st, mode)) return call.reply(error);
    long rc = ::syscall(kSysFchmodat2, dir, name, mode, AT_SYMLINK_NOFOLLOW);
    if (rc != 0 && errno == ENOSYS && !S_ISLNK(st.st_mode)) rc = ::fchmodat(dir, name, mode, 0);
    return call.reply(rc == 0 ? 0 : errno);
  }
  if (int error = answer.judge.decide(at, change.change)) return call.reply(error);
  if (change.change == Change::times) {
    const Times& times = *change.times;
    int rc = ::utimensat(dir, name, times.now ? nullptr : times.at, AT_SYMLINK_NOFOLLOW);
    return call.reply(rc == 0 ? 0 : errno);
  }
  const BrokerSettings& settings = answer.scene.settings;
  uint32_t uid = 0, gid = 0;
  if (!host_id(change.a, settings.sandbox_uid, settings.host_uid, uid) ||
      !host_id(change.b, settings.sandbox_gid, settings.host_gid, gid))
    return call.reply(EPERM);
  call.reply(::fchownat(dir, name, uid, gid, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno);
}

// chmod, chown and times by path; `nofollow` for AT_SYMLINK_NOFOLLOW and lchown.
void change_by_path(BrokerAnswer& answer, int dirfd, uint64_t address, bool nofollow,
                    const Attributes& change) {
  BrokerCall& call = answer.call;
  WalkedPath at;
  if (int error = answer.resolve(dirfd, address, !nofollow, at)) return call.reply(error);
  if (answer.gone()) return;
  struct stat st {};
  if (at.name.empty()) return call.reply(outside_roots(at.parent.get()));  // the root
  if (::fstatat(at.parent.get(), at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return call.reply(errno);
  change_attributes(answer, at, st, change);
}

// fchmod and fchown: the descriptor's object, named by /proc/self/fd's text and walked back
// to the very same object. A pipe's or a socket's mode is no name's, and nothing but files
// and folders is the worker's to change.
void change_by_descriptor(BrokerAnswer& answer, int fd_number, const Attributes& change) {
  BrokerCall& call = answer.call;
  Fd object(
      ::open(proc_path(call.pid, "fd/" + std::to_string(fd_number)).c_str(), O_PATH | O_CLOEXEC));
  if (!object) return call.reply(EBADF);
  if (answer.gone()) return;
  struct stat st {};
  if (::fstat(object.get(), &st) != 0) return call.reply(errno);
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return call.reply(EPERM);
  WalkedPath at;
  if (!answer.name_of(object.get(), at)) return call.reply(EACCES);
  change_attributes(answer, at, st, change);
}

// utime, utimes, futimesat, utimensat: the times are read once (timevals and utimbuf's seconds
// made timespecs; the kernel checks the values when the broker makes the change), then judged
// like a mode: by path, or on a descriptor's own object (futimens, a NULL path or
// AT_EMPTY_PATH).
enum class TimesShape { utimbuf, timevals, timespecs };

int read_times(pid_t pid, uint64_t address, TimesShape shape, Times& times) {
  times.now = address == 0;
  if (times.now) return 0;
  if (shape == TimesShape::timespecs) {
    ssize_t got = read_memory(pid, address, reinterpret_cast<char*>(times.at), sizeof times.at);
    return got == static_cast<ssize_t>(sizeof times.at) ? 0 : EFAULT;
  }
  int64_t raw[4] = {};  // two timevals, or utimbuf's two times (then only raw[0], raw[1])
  size_t want = shape == TimesShape::timevals ? sizeof raw : 2 * sizeof(int64_t);
  if (read_memory(pid, address, reinterpret_cast<char*>(raw), want) != static_cast<ssize_t>(want))
    return EFAULT;
  if (shape == TimesShape::utimbuf) {
    times.at[0] = {raw[0], 0};
    times.at[1] = {raw[1], 0};
    return 0;
  }
  for (int i = 0; i < 2; ++i) {
    if (raw[2 * i + 1] < 0 || raw[2 * i + 1] >= 1000000) return EINVAL;
    times.at[i] = {raw[2 * i], raw[2 * i + 1] * 1000};
  }
  return 0;
}

void change_times(BrokerAnswer& answer, int dirfd, uint64_t address, uint64_t times_address,
                  TimesShape shape, int flags) {
  BrokerCall& call = answer.call;
  if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)) return call.reply(EINVAL);
  Times times;
  if (int error = read_times(call.pid, times_address, shape, times)) return call.reply(error);
  bool own_object = address == 0 && dirfd != AT_FDCWD;
  if (address == 0 && !own_object) return call.reply(EFAULT);
  if (own_object && flags) return call.reply(EINVAL);
  if (!own_object && (flags & AT_EMPTY_PATH)) {
    std::string path;
    if (int error = read_string(call.pid, address, path)) return call.reply(error);
    own_object = path.empty();
  }
  Attributes change{Change::times, 0, 0, &times};
  if (own_object) {
    if (dirfd == AT_FDCWD) return call.reply(EACCES);  // the cwd's own times: not needed
    return change_by_descriptor(answer, dirfd, change);
  }
  change_by_path(answer, dirfd, address, flags & AT_SYMLINK_NOFOLLOW, change);
}

// A unix socket's path, bound through its folder's descriptor as the caller's umask would make it.
void bind_unix_path(BrokerAnswer& answer, int socket, const std::string& path) {
  BrokerCall& call = answer.call;
  WalkedPath at;
  if (int error = answer.resolve_text(AT_FDCWD, path, false, at)) return call.reply(error);
  struct stat st {};
  if (at.name.empty() || exists(at, st)) return call.reply(EADDRINUSE);
  if (int error = answer.judge.decide(at, Change::create)) return call.reply(error);
  std::string through = "/proc/self/fd/" + std::to_string(at.parent.get()) + "/" + at.name;
  sockaddr_un here{};
  here.sun_family = AF_UNIX;
  if (through.size() >= sizeof here.sun_path) return call.reply(ENAMETOOLONG);
  std::memcpy(here.sun_path, through.c_str(), through.size() + 1);
  mode_t mask = answer.memory.umasks.of(call.pid);
  bool own_umask = answer.scene.own_umask;
  if (own_umask) ::umask(mask);
  int rc = ::bind(socket, reinterpret_cast<sockaddr*>(&here), sizeof here);
  if (rc == 0 && !own_umask) ::fchmodat(at.parent.get(), at.name.c_str(), 0777 & ~mask, 0);
  call.reply(rc == 0 ? 0 : errno);
}

// bind(): a unix socket's path is a name like any other. The address lives in the caller's
// memory, so every bind is made here, on the caller's own socket (pidfd_getfd): letting the
// call run would read the address again, after the check.
void bind_socket(BrokerAnswer& answer, int fd_number, uint64_t address, uint64_t length) {
  BrokerCall& call = answer.call;
  const pid_t pid = call.pid;
  if (length < sizeof(sa_family_t) || length > sizeof(sockaddr_storage)) return call.reply(EINVAL);
  sockaddr_storage asked{};
  ssize_t got = read_memory(pid, address, reinterpret_cast<char*>(&asked), length);
  if (got != static_cast<ssize_t>(length)) return call.reply(EFAULT);
  Fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, kPidfdThread)));
  if (!pidfd) pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, tgid_of(pid), 0)));
  Fd socket(pidfd ? static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), fd_number, 0)) : -1);
  if (!socket) return call.reply(errno == EBADF ? EBADF : EACCES);
  if (answer.gone()) return;
  const auto family = asked.ss_family;
  constexpr size_t kPathAt = offsetof(sockaddr_un, sun_path);
  const auto* un = reinterpret_cast<const sockaddr_un*>(&asked);
  if (family == AF_UNIX && length > kPathAt && un->sun_path[0] != '\0')
    return bind_unix_path(answer, socket.get(),
                          std::string(un->sun_path, ::strnlen(un->sun_path, length - kPathAt)));
  if (family == AF_INET || family == AF_INET6) {
    // The warden holds capabilities over the sandbox's network namespace; the worker not.
    uint16_t port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&asked)->sin_port
                                            : reinterpret_cast<sockaddr_in6*>(&asked)->sin6_port);
    if (port != 0 && port < 1024) return call.reply(EACCES);
  }
  int rc =
      ::bind(socket.get(), reinterpret_cast<sockaddr*>(&asked), static_cast<socklen_t>(length));
  call.reply(rc == 0 ? 0 : errno);
}

void truncate_name(BrokerAnswer& answer, uint64_t address, int64_t length) {
  BrokerCall& call = answer.call;
  if (length < 0) return call.reply(EINVAL);
  WalkedPath at;
  if (int error = answer.resolve(AT_FDCWD, address, true, at)) return call.reply(error);
  if (answer.gone()) return;
  if (at.name.empty()) return call.reply(EISDIR);
  struct stat st {};
  if (!exists(at, st)) return call.reply(ENOENT);
  if (int error = answer.judge.decide(at, Change::write)) return call.reply(error);
  Fd fd(::openat(at.parent.get(), at.name.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return call.reply(errno);
  call.reply(::ftruncate(fd.get(), length) == 0 ? 0 : errno);
}

// --- one handler per call: its arguments, in the kernel's order, to the step that serves it ---

void on_open(BrokerAnswer& c) {
  open_name(c, AT_FDCWD, arg(c, 0), c.call.arg_int(1), mode_arg(c, 2));
}
void on_openat(BrokerAnswer& c) {
  open_name(c, dirfd_arg(c, 0), arg(c, 1), c.call.arg_int(2), mode_arg(c, 3));
}
void on_creat(BrokerAnswer& c) {
  open_name(c, AT_FDCWD, arg(c, 0), O_CREAT | O_WRONLY | O_TRUNC, mode_arg(c, 1));
}
void on_mkdir(BrokerAnswer& c) {
  make_folder(c, AT_FDCWD, arg(c, 0), mode_arg(c, 1));
}
void on_mkdirat(BrokerAnswer& c) {
  make_folder(c, dirfd_arg(c, 0), arg(c, 1), mode_arg(c, 2));
}
void on_mknod(BrokerAnswer& c) {
  make_node(c, AT_FDCWD, arg(c, 0), mode_arg(c, 1));
}
void on_mknodat(BrokerAnswer& c) {
  make_node(c, dirfd_arg(c, 0), arg(c, 1), mode_arg(c, 2));
}
void on_unlink(BrokerAnswer& c) {
  remove_name(c, AT_FDCWD, arg(c, 0), 0);
}
void on_rmdir(BrokerAnswer& c) {
  remove_name(c, AT_FDCWD, arg(c, 0), AT_REMOVEDIR);
}
void on_unlinkat(BrokerAnswer& c) {
  if (c.call.arg_int(2) & ~AT_REMOVEDIR) return c.call.reply(EINVAL);
  remove_name(c, dirfd_arg(c, 0), arg(c, 1), c.call.arg_int(2));
}
void on_rename(BrokerAnswer& c) {
  rename_name(c, AT_FDCWD, arg(c, 0), AT_FDCWD, arg(c, 1), 0);
}
void on_renameat(BrokerAnswer& c) {
  rename_name(c, dirfd_arg(c, 0), arg(c, 1), dirfd_arg(c, 2), arg(c, 3), 0);
}
void on_renameat2(BrokerAnswer& c) {
  rename_name(c, dirfd_arg(c, 0), arg(c, 1), dirfd_arg(c, 2), arg(c, 3),
              static_cast<unsigned>(arg(c, 4)));
}
void on_symlink(BrokerAnswer& c) {
  make_symlink(c, arg(c, 0), AT_FDCWD, arg(c, 1));
}
void on_symlinkat(BrokerAnswer& c) {
  make_symlink(c, arg(c, 0), dirfd_arg(c, 1), arg(c, 2));
}
void on_truncate(BrokerAnswer& c) {
  truncate_name(c, arg(c, 0), static_cast<int64_t>(arg(c, 1)));
}
void on_chmod(BrokerAnswer& c) {
  change_by_path(c, AT_FDCWD, arg(c, 0), false, {Change::mode, arg(c, 1)});
}
void on_fchmod(BrokerAnswer& c) {
  change_by_descriptor(c, c.call.arg_int(0), {Change::mode, arg(c, 1)});
}
void on_fchmodat(BrokerAnswer& c) {
  change_by_path(c, dirfd_arg(c, 0), arg(c, 1), false, {Change::mode, arg(c, 2)});
}
void on_fchmodat2(BrokerAnswer& c) {
  if (c.call.arg_int(3) & ~AT_SYMLINK_NOFOLLOW) return c.call.reply(EINVAL);
  change_by_path(c, dirfd_arg(c, 0), arg(c, 1), c.call.arg_int(3) & AT_SYMLINK_NOFOLLOW,
                 {Change::mode, arg(c, 2)});
}
void on_chown(BrokerAnswer& c) {
  change_by_path(c, AT_FDCWD, arg(c, 0), false, {Change::owner, arg(c, 1), arg(c, 2)});
}
void on_lchown(BrokerAnswer& c) {
  change_by_path(c, AT_FDCWD, arg(c, 0), true, {Change::owner, arg(c, 1), arg(c, 2)});
}
void on_fchown(BrokerAnswer& c) {
  change_by_descriptor(c, c.call.arg_int(0), {Change::owner, arg(c, 1), arg(c, 2)});
}
void on_fchownat(BrokerAnswer& c) {
  Attributes change{Change::owner, arg(c, 2), arg(c, 3)};
  if (c.call.arg_int(4) & AT_EMPTY_PATH) return change_by_descriptor(c, dirfd_arg(c, 0), change);
  change_by_path(c, dirfd_arg(c, 0), arg(c, 1), c.call.arg_int(4) & AT_SYMLINK_NOFOLLOW, change);
}
void on_utime(BrokerAnswer& c) {
  change_times(c, AT_FDCWD, arg(c, 0), arg(c, 1), TimesShape::utimbuf, 0);
}
void on_utimes(BrokerAnswer& c) {
  change_times(c, AT_FDCWD, arg(c, 0), arg(c, 1), TimesShape::timevals, 0);
}
void on_futimesat(BrokerAnswer& c) {
  change_times(c, dirfd_arg(c, 0), arg(c, 1), arg(c, 2), TimesShape::timevals, 0);
}
void on_utimensat(BrokerAnswer& c) {
  change_times(c, dirfd_arg(c, 0), arg(c, 1), arg(c, 2), TimesShape::timespecs, c.call.arg_int(3));
}
void on_bind(BrokerAnswer& c) {
  bind_socket(c, c.call.arg_int(0), arg(c, 1), arg(c, 2));
}
void on_umask(BrokerAnswer& c) {
  // Its argument is a register, not memory: letting it run is safe.
  c.memory.umasks.changing();
  c.call.let_run();
}

}  // namespace

const std::vector<BrokeredCall>& brokered_calls() {
  static const std::vector<BrokeredCall> calls = {
      {"open", on_open, "opened by the broker on the folder it resolved (only when it may write)"},
      {"openat", on_openat, "as open, from a folder's descriptor"},
      {"creat", on_creat, "as open with O_CREAT|O_WRONLY|O_TRUNC"},
      {"mkdir", on_mkdir, "a new name; in the workspace always its owner's to read and search"},
      {"mkdirat", on_mkdirat, "as mkdir, from a folder's descriptor"},
      {"mknod", on_mknod, "a new name; a regular file only, no device or FIFO"},
      {"mknodat", on_mknodat, "as mknod, from a folder's descriptor"},
      {"unlink", on_unlink, "a name removed; a held file's last name goes to the morgue"},
      {"unlinkat", on_unlinkat, "as unlink, or rmdir with AT_REMOVEDIR"},
      {"rmdir", on_rmdir, "a folder's name removed"},
      {"rename", on_rename, "both names judged, and everything below a folder that moves"},
      {"renameat", on_renameat, "as rename, from folders' descriptors"},
      {"renameat2", on_renameat2, "as renameat; RENAME_EXCHANGE judged each way, no whiteout"},
      {"symlink", on_symlink, "a new name; in the workspace only to an ordinary place in it"},
      {"symlinkat", on_symlinkat, "as symlink, from a folder's descriptor"},
      {"truncate", on_truncate, "a write to a name: judged as opening it for writing"},
      {"chmod", on_chmod, "a mode: no set-id bit, no folder hidden from the quota's survey"},
      {"fchmod", on_fchmod, "a mode on a descriptor's file, named back to the same object"},
      {"fchmodat", on_fchmodat, "as chmod, from a folder's descriptor"},
      {"fchmodat2", on_fchmodat2, "as fchmodat, with AT_SYMLINK_NOFOLLOW"},
      {"chown", on_chown, "an owner: only to the ids the worker has"},
      {"lchown", on_lchown, "as chown, the link itself"},
      {"fchown", on_fchown, "as chown, on a descriptor's file, named back to the same object"},
      {"fchownat", on_fchownat, "as chown or fchown (AT_EMPTY_PATH)"},
      {"utime", on_utime, "times on a name (build tools and backups read them)"},
      {"utimes", on_utimes, "as utime, with microseconds"},
      {"futimesat", on_futimesat, "as utimes, from a folder's descriptor"},
      {"utimensat", on_utimensat, "as utimes, or on a descriptor's own file (futimens)"},
      {"bind", on_bind, "a unix socket's path is a name: the address read once, bound here"},
      {"umask", on_umask, "a register: let run, and the callers' umask no longer kept"},
  };
  return calls;
}

}  // namespace belljar
