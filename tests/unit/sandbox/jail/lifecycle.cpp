// How a sandboxed worker starts, is interrupted, ends and is ended, and that nothing of it
// outlives the session or its supervisor.
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

std::string pid_namespace_of(pid_t pid) {
  std::error_code ec;
  auto link = fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/pid", ec);
  return ec ? std::string() : link.string();
}

// Host pids of every live process in the given pid namespace.
std::vector<pid_t> processes_in(const std::string& pid_ns) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(name);
    if (pid_namespace_of(pid) == pid_ns) found.push_back(pid);
  }
  return found;
}

// The jail's init is not dumpable, so an unprivileged test cannot read its ns link; it is
// found as the worker's parent instead.
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("PPid:", 0) == 0) return static_cast<pid_t>(std::stol(line.substr(5)));
  return -1;
}

// Whether `pid` exits within `timeout_ms` (or already has): its pidfd turns readable then, any
// process's, not only a child's. When the init of a pid namespace exits, the kernel has already
// killed and reaped every other process in it; init itself stays listed (a zombie) until its
// parent, or whoever inherits it, reaps it.
bool exits(pid_t pid, int timeout_ms = 5000) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  bool exited = ::poll(&p, 1, timeout_ms) > 0;
  ::close(fd);
  return exited;
}

// Nothing is left in the namespace but its init, which exited and may not be reaped yet.
bool nothing_but(pid_t init, const std::vector<pid_t>& left) {
  return left.empty() || left == std::vector<pid_t>{init};
}

}  // namespace

TEST_CASE("the exit status and the signal of the worker are reported", "[sandbox]") {
  TempDir ws;
  SECTION("exit status") {
    auto run = run_probe("os._exit(3)\n", test_policy(ws.path));
    CHECK(run.exit.exit_code == 3);
    CHECK(run.exit.signal == 0);
    CHECK_FALSE(run.exit.memory_limit);
    CHECK(run.exit.describe() == "exit status 3");
  }
  SECTION("signal") {
    auto run = run_probe("os.kill(os.getpid(), 11)\n", test_policy(ws.path));
    CHECK(run.exit.signal == 11);
    CHECK(run.exit.describe() == "signal 11 (SIGSEGV)");
  }
  SECTION("isolation none") {
    auto run = run_probe("os._exit(5)\n", test_policy(ws.path, Isolation::none));
    CHECK(run.exit.exit_code == 5);
  }
}

TEST_CASE("interrupt raises KeyboardInterrupt in the worker and reaches its subprocesses",
          "[sandbox]") {
  TempDir ws;
  const std::string body = R"PY(
import subprocess
child = subprocess.Popen(['/bin/sleep', '30'])
try:
    report({'ready': True})
    time.sleep(30)
    report({'interrupted': False})
except KeyboardInterrupt:
    report({'interrupted': True, 'child': child.wait(timeout=5)})
)PY";
  // Like a reactor on signalfd, the starting thread blocks SIGINT and ignores SIGPIPE: the
  // worker must not inherit either.
  sigset_t blocked, previous;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  REQUIRE(::pthread_sigmask(SIG_BLOCK, &blocked, &previous) == 0);
  auto old_pipe = ::signal(SIGPIPE, SIG_IGN);
  for (auto isolation : {Isolation::strict, Isolation::none}) {
    INFO("isolation " << isolation_name(isolation));
    FakeWorker fake(body);
    WorkerProcess worker = WorkerProcess::start(test_policy(ws.path, isolation), fake.launch());
    bool sent = false;
    auto run = collect(worker, 20, [&](WorkerProcess& w, const std::string& frames) {
      if (!sent && frames.find("ready") != std::string::npos) {
        w.interrupt();
        sent = true;
      }
    });
    std::istringstream lines(run.frames);
    std::string first, second;
    std::getline(lines, first);
    std::getline(lines, second);
    auto r = nlohmann::json::parse(second, nullptr, false);
    INFO(run.frames << run.err);
    CHECK(r["interrupted"] == true);
    CHECK(r["child"] == -SIGINT);
    CHECK(run.exit.exit_code == 0);
  }
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::signal(SIGPIPE, old_pipe);
}

TEST_CASE("kill ends every process in the sandbox, detached ones too", "[sandbox]") {
  TempDir ws;
  FakeWorker fake(R"PY(
import subprocess
# A daemon: double fork and a new session, the classic way to escape a process tree. The
# daemon and the shell's own sleep each say on the pipe when they run: then all are there.
running, tell = os.pipe()
subprocess.Popen(['/bin/sh', '-c',
                  '(setsid /bin/sh -c "echo; exec /bin/sleep 60" &) ; /bin/sleep 60 & echo; wait'],
                 stdout=tell)
os.close(tell)
said = b''
while len(said) < 2:
    said += os.read(running, 2 - len(said))
report({'ready': True})
time.sleep(60)
)PY");
  WorkerProcess worker = WorkerProcess::start(test_policy(ws.path), fake.launch());
  std::string ns = pid_namespace_of(worker.worker_pid());
  pid_t init = parent_of(worker.worker_pid());
  REQUIRE_FALSE(ns.empty());
  REQUIRE(init > 1);
  bool killed = false;
  auto run = collect(worker, 20, [&](WorkerProcess& w, const std::string& frames) {
    if (!killed && frames.find("ready") != std::string::npos) {
      CHECK(processes_in(ns).size() >= 4);  // python, sh, sleep, the detached sleep (and init)
      w.kill();
      killed = true;
    }
  });
  CHECK(run.exit.signal == SIGKILL);
  CHECK(exits(init));
  CHECK(nothing_but(init, processes_in(ns)));
}

TEST_CASE("the sandbox dies when its supervisor dies", "[sandbox]") {
  TempDir ws;
  FakeWorker fake("time.sleep(60)\n");
  int report_pipe[2], go_pipe[2];
  REQUIRE(::pipe(report_pipe) == 0);
  REQUIRE(::pipe(go_pipe) == 0);
  pid_t supervisor = ::fork();
  REQUIRE(supervisor >= 0);
  if (supervisor == 0) {
    // A stand-in supervisor: starts the jail, says where it is, and once the test has seen
    // the sandbox's namespace (it closes the go pipe), dies without cleaning up.
    ::close(report_pipe[0]);
    ::close(go_pipe[1]);
    try {
      WorkerProcess worker = WorkerProcess::start(test_policy(ws.path), fake.launch());
      pid_t pids[2] = {worker.worker_pid(), parent_of(worker.worker_pid())};
      if (::write(report_pipe[1], pids, sizeof pids) != sizeof pids) _exit(2);
      char byte;
      (void)::read(go_pipe[0], &byte, 1);
      ::kill(::getpid(), SIGKILL);
    } catch (...) {
    }
    _exit(1);
  }
  ::close(report_pipe[1]);
  ::close(go_pipe[0]);
  pid_t pids[2] = {-1, -1};
  REQUIRE(::read(report_pipe[0], pids, sizeof pids) == sizeof pids);
  ::close(report_pipe[0]);
  // Read while the supervisor lives: once it dies, the sandbox goes (the subject of the test).
  std::string ns = pid_namespace_of(pids[0]);
  ::close(go_pipe[1]);
  REQUIRE(pids[1] > 1);
  int status;
  ::waitpid(supervisor, &status, 0);
  CHECK(WIFSIGNALED(status));
  REQUIRE_FALSE(ns.empty());
  CHECK(exits(pids[1]));
  CHECK(nothing_but(pids[1], processes_in(ns)));
}

TEST_CASE("a failed start names the step and leaves nothing running", "[sandbox]") {
  TempDir ws;
  TempDir bin("belljar-bin");
  // Executable on the host, but not a program: execve fails inside the jail, after every
  // other layer is built.
  write_file(bin / "lib/python3.11/os.py", "");  // the landmark of a prefix
  write_file(bin / "bin/python3", std::string("\x7f"
                                              "ELF garbage",
                                              12));
  fs::permissions(bin / "bin/python3", fs::perms::owner_all | fs::perms::group_exec |
                                           fs::perms::others_exec | fs::perms::group_read |
                                           fs::perms::others_read);
  FakeWorker fake("pass\n");
  auto policy = test_policy(ws.path);
  policy.python = (bin / "bin/python3").string();
  try {
    WorkerProcess::start(policy, test_launch(policy.python, fake.package.path));
    FAIL("start() should have thrown");
  } catch (const SandboxError& e) {
    std::string message = e.what();
    INFO(message);
    CHECK(message.find("execve(" + policy.python + ")") != std::string::npos);
    CHECK(message.find("ENOEXEC") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
  // No child of ours is left (the warden was reaped, its jail died with it).
  std::ifstream children("/proc/self/task/" + std::to_string(::getpid()) + "/children");
  std::string rest;
  children >> rest;
  CHECK(rest.empty());
}

TEST_CASE("a missing package or workspace is refused before anything starts", "[sandbox]") {
  TempDir ws;
  TempDir empty("belljar-empty");
  CHECK_THROWS_WITH(
      WorkerProcess::start(test_policy(ws.path), test_launch(kTestPython, empty.path)),
      Catch::Contains("no belljar_worker directory"));
  FakeWorker fake("pass\n");
  CHECK_THROWS_WITH(WorkerProcess::start(test_policy(ws / "missing"), fake.launch()),
                    Catch::Contains("--workspace"));
}
