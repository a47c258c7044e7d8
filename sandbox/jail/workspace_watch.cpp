#include "sandbox/jail/workspace_watch.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "sandbox/layers/mounts.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {
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
  WorkspaceSurvey first = survey_workspace(spec_.workspace, rules(false));
  remember(first.guards);
  return first.guards;
}

void WorkspaceWatch::attach(pid_t init) {
  std::string ns = "/proc/" + std::to_string(init) + "/ns/";
  user_ns_.reset(::open((ns + "user").c_str(), O_RDONLY | O_CLOEXEC));
  mnt_ns_.reset(::open((ns + "mnt").c_str(), O_RDONLY | O_CLOEXEC));
  if (!user_ns_ || !mnt_ns_) throw_errno("open(" + ns + "user, mnt)");
}

void WorkspaceWatch::in_jail(const std::vector<GuardedPath>& guards, int read_only) {
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
        Fd masks = make_mask_source();
        apply_guards(workspace.get(), masks.get(), guards, spec_.workspace);
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
    WorkspaceSurvey now = survey_workspace(spec_.workspace, rules(measure));
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
  reply.micros = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                           std::chrono::steady_clock::now() - started)
                                           .count());
  return reply;
}

}  // namespace belljar
