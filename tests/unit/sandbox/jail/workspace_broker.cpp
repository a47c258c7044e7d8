// The broker end to end without a sandbox: a child process installs the worker's real filter
// (seccomp_filter.hpp, with the broker's listener), hands the listener to this process, which
// answers with a WorkspaceBroker, and then makes one call of each kind a cell makes. Each call
// reaches its handler through the dispatch table and comes back as the kernel would answer it:
// made, refused with the judge's errno (and on record), or let run.
#include "sandbox/jail/workspace_broker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "sandbox/layers/seccomp_filter.hpp"
#include "sandbox/os/fd_passing.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

// The child's listener, once it has sent it (sandbox/os/fd_passing.hpp, as init hands over its
// connections): waited for on the socket, at most 30 s.
Fd listener_from(int socket) {
  pollfd ready{socket, POLLIN, 0};
  if (::poll(&ready, 1, 30'000) != 1) return Fd();
  int status = 0;
  return receive_fd(socket, status);
}
// 0 for a call that succeeded, its errno otherwise.
int outcome(long rc) {
  return rc < 0 ? errno : 0;
}

// The calls, in the child, under the filter: each one's outcome, in order, written to `out`.
[[noreturn]] void make_calls(const std::string& ws, int out) {
  auto at = [&](const char* name) { return ws + "/" + name; };
  int results[] = {
      outcome(::mkdir(at("made").c_str(), 0755)),
      outcome(::mkdir(at(".git").c_str(), 0755)),
      outcome(::open(at("f.txt").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644)),
      outcome(::open(at(".bashrc").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644)),
      outcome(::rename(at("f.txt").c_str(), at("g.txt").c_str())),
      outcome(::rename(at("g.txt").c_str(), at(".profile").c_str())),
      outcome(::chmod(at("g.txt").c_str(), 04755)),
      outcome(::chmod(at("g.txt").c_str(), 0600)),
      outcome(::symlink("/etc/passwd", at("out").c_str())),
      outcome(::symlink("g.txt", at("in").c_str())),
      outcome(::link(at("g.txt").c_str(), at("hard").c_str())),
      outcome(::truncate(at("g.txt").c_str(), 3)),
      outcome(::unlink(at("in").c_str())),
      outcome(::rmdir(at("made").c_str())),
      static_cast<int>(::umask(022)),  // let run: the mask before, as the kernel says
      static_cast<int>(::umask(077)),
  };
  bool written = ::write(out, results, sizeof results) == static_cast<ssize_t>(sizeof results);
  ::_exit(written ? 0 : 1);
}

}  // namespace

TEST_CASE("each brokered call reaches its handler and is answered as the kernel would",
          "[workspace-broker]") {
  TempDir ws("belljar-broker-unit");
  int pair[2], results[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
  REQUIRE(::pipe2(results, O_CLOEXEC) == 0);
  Fd ours(pair[0]), theirs(pair[1]), read_end(results[0]), write_end(results[1]);
  const std::string workspace = ws.path.string();

  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::umask(027);
    Fd listener;
    try {
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(2);
      SeccompOptions options;
      options.broker = true;
      listener = install_seccomp(options);
    } catch (...) {
      ::_exit(3);
    }
    char go = 0;
    if (send_fd(theirs.get(), listener.get()) != 0 || ::read(theirs.get(), &go, 1) != 1) ::_exit(4);
    listener.reset();
    make_calls(workspace, write_end.get());
  }
  theirs.reset();
  write_end.reset();

  std::mutex refused_lock;
  std::vector<BrokerRefusal> refused;
  {
    Fd listener = listener_from(ours.get());
    REQUIRE(listener);
    BrokerSettings settings;
    settings.workspace = workspace;
    settings.writable_roots = {workspace};
    WorkspaceBroker broker(std::move(listener), std::move(settings),
                           [&](const BrokerRefusal& refusal) {
                             std::lock_guard<std::mutex> hold(refused_lock);
                             refused.push_back(refusal);
                           });
    char go = 1;
    REQUIRE(::write(ours.get(), &go, 1) == 1);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
  }

  int got[16] = {};
  REQUIRE(::read(read_end.get(), got, sizeof got) == static_cast<ssize_t>(sizeof got));
  const int expected[16] = {
      0,       // mkdir made
      EACCES,  // mkdir .git
      0,       // open f.txt for writing: made by the broker, handed back
      EACCES,  // open .bashrc
      0,       // rename f.txt -> g.txt
      EACCES,  // rename g.txt -> .profile
      EPERM,   // chmod 04755: no set-id bit
      0,       // chmod 0600
      EACCES,  // a link out of the workspace
      0,       // a link to g.txt
      EPERM,   // a hard link: the filter's own refusal
      0,       // truncate
      0,       // unlink the link
      0,       // rmdir made
      027,     // umask: let run
      022,
  };
  for (int i = 0; i < 16; ++i) {
    INFO("call " << i);
    CHECK(got[i] == expected[i]);
  }
  // The changes were made on disk, owned as the caller's would be, with its umask.
  struct stat st {};
  REQUIRE(::stat((ws.path / "g.txt").c_str(), &st) == 0);
  CHECK(st.st_size == 3);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(::access((ws.path / "made").c_str(), F_OK) != 0);
  CHECK(::access((ws.path / ".git").c_str(), F_OK) != 0);
  CHECK(::access((ws.path / ".bashrc").c_str(), F_OK) != 0);
  CHECK(::access((ws.path / "out").c_str(), F_OK) != 0);
  // Each refusal of the judge on record, once per path, named from the workspace.
  std::vector<std::string> paths;
  for (const auto& refusal : refused) paths.push_back(refusal.path + " " + refusal.change);
  CHECK(paths ==
        std::vector<std::string>{".git create", ".bashrc create", ".profile rename", "out link"});
}

TEST_CASE("degraded, the --ro parts inside the workspace are protected names",
          "[workspace-broker]") {
  std::vector<JailBind> binds = {
      {"/w/ws/config.yaml", "/w/ws/config.yaml", JailBind::Kind::read_only},
      {"/w/ws/ref", "/w/ws/ref", JailBind::Kind::read_only},
      {"/opt/data", "/opt/data", JailBind::Kind::read_only},  // outside: Landlock's
      {"/w/ws", "/w/ws", JailBind::Kind::workspace},
      {"/w/ws/dev", "/w/ws/dev", JailBind::Kind::device},
      {"/w/wsx/a", "/w/wsx/a", JailBind::Kind::read_only},
  };
  CHECK(read_only_patterns(binds, "/w/ws") == std::vector<std::string>{"/config.yaml", "/ref"});
  WorkspaceRule rule(read_only_patterns(binds, "/w/ws"), {});
  CHECK(rule.closed({"config.yaml"}));
  CHECK(rule.closed({"ref", "a.txt"}));
  CHECK_FALSE(rule.closed({"sub", "ref"}));  // anchored at the workspace's top
  CHECK_FALSE(rule.closed({"data.csv"}));
}
