#include "sandbox/jail/workspace_watch.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "sandbox/layers/mounts.hpp"
#include "sandbox/os/fd_passing.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

uint64_t micros_since(std::chrono::steady_clock::time_point started) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now() - started)
                                   .count());
}
// mkdirat(dir, name, 0700), owned by the workspace's owner when a root warden made it; the
// errno when it could not be made, 0 when it was made or was there.
int make_owned_folder(int dir, const char* name, bool host_root, int workspace) {
  if (::mkdirat(dir, name, 0700) != 0) return errno == EEXIST ? 0 : errno;
  struct stat ws {};
  if (host_root && ::fstat(workspace, &ws) == 0)
    (void)::fchownat(dir, name, ws.st_uid, ws.st_gid, AT_SYMLINK_NOFOLLOW);
  return 0;
}

// The morgue at the workspace's top, a folder of the workspace owner's, and this warden's folder
// in it (morgue_folder), made and locked (the returned descriptor holds the flock while the
// warden lives), emptied if a warden of the same pid left it. The folders of kernels that are
// gone (unlocked: their wardens were killed) are emptied and removed; a live kernel's are left.
// An empty Fd when the workspace's top cannot be written (read-only, another's, full): the
// broker then refuses to remove a held file's last name (BrokerSettings::guard_last_names).
Fd make_morgue(int workspace, bool host_root, std::string& name) {
  if (int error = make_owned_folder(workspace, kMorgueName, host_root, workspace)) {
    if (error == EACCES || error == EPERM || error == EROFS || error == ENOSPC || error == EDQUOT)
      return Fd();
    throw_errno(std::string("mkdir(") + kMorgueName + ") in the workspace", error);
  }
  Fd morgue(::openat(workspace, kMorgueName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!morgue)
    throw SetupError(std::string("the workspace holds ") + kMorgueName +
                     ", which is not belljar's morgue folder (" + errno_text(errno) +
                     "); move it away");
  // A name no other warden has (pids repeat across pid namespaces), made with mkdir's own
  // exclusion, then locked without waiting: another start may take it for a dead kernel's
  // between the mkdir and the lock, so it is ours once locked and still there.
  for (int attempt = 0; attempt < 8; ++attempt) {
    uint64_t random = 0;
    if (::getrandom(&random, sizeof random, 0) != sizeof random) throw_errno("getrandom");
    char text[40];
    std::snprintf(text, sizeof text, "%d-%016llx", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(random));
    if (::mkdirat(morgue.get(), text, 0700) != 0) {
      if (errno == EEXIST) continue;
      throw_errno("mkdir(" + morgue_folder(text) + ") in the workspace");
    }
    struct stat ws {};
    if (host_root && ::fstat(workspace, &ws) == 0)
      (void)::fchownat(morgue.get(), text, ws.st_uid, ws.st_gid, AT_SYMLINK_NOFOLLOW);
    Fd mine(::openat(morgue.get(), text, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!mine || ::flock(mine.get(), LOCK_EX | LOCK_NB) != 0) continue;
    struct stat held {
    }, named{};
    if (::fstat(mine.get(), &held) != 0 ||
        ::fstatat(morgue.get(), text, &named, AT_SYMLINK_NOFOLLOW) != 0 ||
        held.st_ino != named.st_ino || held.st_dev != named.st_dev)
      continue;
    name = text;
    remove_dead_morgues(morgue.get(), name);  // what killed kernels left
    return mine;
  }
  throw SetupError(std::string("no folder of its own could be made in the morgue (") + kMorgueName +
                   "): other starts kept removing it");
}

unsigned long inode_of(const std::string& workspace, const std::string& relative) {
  struct stat st {};
  if (::lstat((workspace + "/" + relative).c_str(), &st) != 0) return 0;
  return static_cast<unsigned long>(st.st_ino);
}
}  // namespace

WorkspaceWatch::WorkspaceWatch(const JailSpec& spec) : spec_(spec) {}

WorkspaceRules WorkspaceWatch::rules(bool measure) const {
  WorkspaceRules rules;
  rules.hide = spec_.hide_patterns;
  rules.protect = spec_.protect_patterns;
  rules.writable = spec_.writable_patterns;
  rules.measure = measure && spec_.workspace_quota_bytes > 0;
  return rules;
}

void WorkspaceWatch::remember(const std::vector<GuardedPath>& guards) {
  for (const auto& guard : guards)
    guarded_[guard.relative] = inode_of(spec_.workspace, guard.relative);
}

std::vector<GuardedPath> WorkspaceWatch::first_survey() {
  bool protect_git = false;
  for (const auto& pattern : spec_.protect_patterns) protect_git |= pattern == ".git";
  Fd workspace(::open(spec_.workspace.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!workspace) throw_errno("open(" + spec_.workspace + ")");
  struct stat st {};
  if (protect_git && ::fstatat(workspace.get(), ".git", &st, AT_SYMLINK_NOFOLLOW) != 0 &&
      errno == ENOENT) {
    if (::mkdirat(workspace.get(), ".git", 0755) == 0) {
      struct stat ws {};
      // Made by a root warden: it belongs to the workspace's owner like everything around it.
      if (spec_.host_root && ::fstat(workspace.get(), &ws) == 0)
        (void)::fchownat(workspace.get(), ".git", ws.st_uid, ws.st_gid, AT_SYMLINK_NOFOLLOW);
    }
  }
  if (spec_.broker) morgue_lock_ = make_morgue(workspace.get(), spec_.host_root, morgue_name_);
  has_morgue_ = bool(morgue_lock_);
  WorkspaceSurvey first = survey_workspace(spec_.workspace, rules(false));
  // The morgue's mask comes once the broker holds what lies under it (hold_morgue).
  std::erase_if(first.guards,
                [](const GuardedPath& guard) { return guard.relative == kMorgueName; });
  remember(first.guards);
  held_ = std::move(first.held);
  return first.guards;
}

Fd WorkspaceWatch::hold_morgue() {
  if (!has_morgue_) return Fd();
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) throw_errno("socketpair");
  Fd ours(pair[0]), theirs(pair[1]);
  GuardedPath guard{kMorgueName, true, GuardKind::mask, "belljar's morgue"};
  in_jail({guard}, -1, theirs.get());
  int status = 0;
  Fd morgue = receive_fd(ours.get(), status);
  if (!morgue)
    throw SetupError("the morgue (" + std::string(kMorgueName) + ") was not handed over");
  remember({guard});
  return morgue;
}

void WorkspaceWatch::sweep_morgue(bool all) {
  if (!morgue_name_.empty()) belljar::sweep_morgue(spec_.workspace, morgue_name_, !all);
}

void WorkspaceWatch::attach(pid_t init) {
  std::string ns = "/proc/" + std::to_string(init) + "/ns/";
  user_ns_.reset(::open((ns + "user").c_str(), O_RDONLY | O_CLOEXEC));
  mnt_ns_.reset(::open((ns + "mnt").c_str(), O_RDONLY | O_CLOEXEC));
  if (!user_ns_ || !mnt_ns_) throw_errno("open(" + ns + "user, mnt)");
}

void WorkspaceWatch::in_jail(const std::vector<GuardedPath>& guards, int read_only,
                             int morgue_channel) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2");
  Fd said(fds[0]), say(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork(the workspace guard)");
  if (pid == 0) {
    said.reset();
    try {
      // The warden owns the jail's user namespace, so it may enter it (with every capability
      // there) and, through it, the jail's mount namespace; the host's own stays untouched.
      if (::setns(user_ns_.get(), CLONE_NEWUSER) != 0)
        throw_errno("setns(the jail's user namespace)");
      if (::setns(mnt_ns_.get(), CLONE_NEWNS) != 0)
        throw_errno("setns(the jail's mount namespace)");
      // The sandbox's identity, as init has it: files made here (the masks) must map.
      if (spec_.host_root && ::setgroups(0, nullptr) != 0) throw_errno("setgroups(0)");
      if (::setresgid(kSandboxGid, kSandboxGid, kSandboxGid) != 0) throw_errno("setresgid(1000)");
      if (::setresuid(kSandboxUid, kSandboxUid, kSandboxUid) != 0) throw_errno("setresuid(1000)");
      if (::chdir("/") != 0) throw_errno("chdir(/)");
      if (!guards.empty()) {
        Fd workspace = open_jail_workspace(spec_.workspace);
        if (morgue_channel >= 0) {
          // What lies under the mask about to go on: the broker's, on the jail's own mount.
          Fd morgue(::openat(workspace.get(), morgue_folder(morgue_name_).c_str(),
                             O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (!morgue) throw_errno("open(" + morgue_folder(morgue_name_) + ") in the jail");
          if (int error = send_fd(morgue_channel, morgue.get()))
            throw_errno("send the morgue", error);
        }
        Fd masks = make_mask_source();
        auto applied = apply_guards(workspace.get(), masks.get(), guards, spec_.workspace);
        if (morgue_channel >= 0 && applied.size() != guards.size())
          throw SetupError(std::string("the morgue (") + kMorgueName + ") could not be masked");
      }
      if (read_only >= 0) set_workspace_read_only(spec_.workspace, read_only == 1);
      _exit(0);
    } catch (const std::exception& e) {
      std::string text = e.what();
      (void)::write(say.get(), text.data(), text.size());
    }
    _exit(1);
  }
  say.reset();
  std::string failure = read_to_eof(said.get());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw SetupError(failure.empty() ? "the workspace guard's child failed" : failure);
}

SurveyReport WorkspaceWatch::survey(std::optional<uint64_t> baseline, bool measure) {
  auto started = std::chrono::steady_clock::now();
  SurveyReport reply;
  try {
    sweep_morgue(false);  // what nobody holds any more is neither kept nor counted
    WorkspaceSurvey now = survey_workspace(spec_.workspace, rules(measure));
    held_ = std::move(now.held);
    std::vector<GuardedPath> fresh;
    for (const auto& guard : now.guards) {
      auto known = guarded_.find(guard.relative);
      // A path replaced on the host is a new inode: a mount on the old one no longer covers it.
      if (known == guarded_.end() || known->second != inode_of(spec_.workspace, guard.relative))
        fresh.push_back(guard);
    }
    measure = measure && spec_.workspace_quota_bytes > 0;
    uint64_t added = measure && baseline && now.bytes > *baseline ? now.bytes - *baseline : 0;
    // Unmeasured, the quota's state stays as the last measurement left it.
    if (measure) over_ = spec_.workspace_quota_bytes > 0 && added > spec_.workspace_quota_bytes;
    bool over = over_;
    if (!fresh.empty()) in_jail(fresh, -1);
    remember(fresh);
    if (over != read_only_) {
      try {
        in_jail({}, over ? 1 : 0);
        read_only_ = over;
      } catch (const SetupError& e) {
        // EBUSY: a file is open for writing. The supervisor stops the cell; the next survey
        // tries again, and a process that holds on is killed with the sandbox.
        reply.busy = e.what();
      }
    }
    for (const auto& guard : fresh)
      reply.guarded.push_back({guard.relative, guard.kind, guard.reason});
    if (measure) {
      reply.bytes = now.bytes;
      reply.added_bytes = added;
    }
    reply.entries = now.entries;
    reply.over_quota = over;
    reply.read_only = read_only_;
  } catch (const std::exception& e) {
    reply.error = e.what();
  }
  reply.micros = micros_since(started);
  return reply;
}

SurveyReport survey_names_only(const std::string& workspace, const WorkspaceRules& rules,
                               std::optional<HeldNames>& held) {
  auto started = std::chrono::steady_clock::now();
  SurveyReport reply;
  try {
    WorkspaceSurvey now = survey_workspace(workspace, rules);
    reply.entries = now.entries;
    held = std::move(now.held);
  } catch (const std::exception& e) {
    reply.error = e.what();
  }
  reply.micros = micros_since(started);
  return reply;
}

}  // namespace belljar
