// Fail closed: strict refuses a host without a layer, naming it and the fix; degraded runs
// with what exists (here: a host report without user namespaces) and says what is missing.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>

#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

LayerReport without_user_namespaces() {
  LayerReport host = host_layers();
  host.user_ns = false;
  host.mount_ns = host.pid_ns = host.net_ns = host.ipc_ns = host.uts_ns = host.cgroup_ns = false;
  host.user_ns_problem = "user namespaces are disabled (sysctl kernel.unprivileged_userns_clone=0)";
  return host;
}

}  // namespace

TEST_CASE("strict refuses to start without a layer, in one line naming it and the fix",
          "[sandbox]") {
  TempDir ws;
  FakeWorker fake("report('ran')\n");
  SECTION("user namespaces") {
    try {
      WorkerProcess::start(test_policy(ws.path), fake.launch(), without_user_namespaces());
      FAIL("strict started without user namespaces");
    } catch (const SandboxError& e) {
      CHECK(std::string(e.what()) ==
            "user namespaces are disabled (sysctl kernel.unprivileged_userns_clone=0): enable them "
            "or pass "
            "--isolation degraded");
    }
    auto plan = plan_enforcement(test_policy(ws.path), without_user_namespaces());
    CHECK_FALSE(plan.enforceable);
    CHECK(plan.text().find("NOT enforceable") != std::string::npos);
  }
  SECTION("seccomp") {
    LayerReport host = host_layers();
    host.seccomp = false;
    CHECK_THROWS_WITH(WorkerProcess::start(test_policy(ws.path), fake.launch(), host),
                      Catch::StartsWith("seccomp is unavailable") &&
                          Catch::EndsWith("or pass --isolation degraded"));
  }
  SECTION("the plan says how the session's memory is capped, with or without a cgroup") {
    LayerReport host = host_layers();
    host.cgroups = CgroupParents{};
    std::string without = plan_enforcement(test_policy(ws.path), host).text();
    INFO(without);
    CHECK(without.find("RLIMIT_AS/RLIMIT_DATA cap each process, and the warden samples the "
                       "session's total") != std::string::npos);
    CHECK(without.find("memfds and SysV shared memory are refused") != std::string::npos);
    host.cgroups.v1_memory = "/sys/fs/cgroup/memory/example";
    std::string with = plan_enforcement(test_policy(ws.path), host).text();
    INFO(with);
    CHECK(with.find("the cgroup caps the session's total at --memory") != std::string::npos);
    CHECK(with.find("memfd_create and SysV IPC (shmget, msgget, semget) get ENOSYS") !=
          std::string::npos);
  }
  SECTION("this host offers every layer") {
    auto plan = plan_enforcement(test_policy(ws.path), host_layers());
    INFO(plan.text());
    CHECK(plan.enforceable);
    CHECK(plan.namespaces);
  }
}

TEST_CASE("degraded mode without namespaces: Landlock, seccomp without inet, rlimits, and notes",
          "[sandbox]") {
  TempDir ws;
  // Outside /tmp (which degraded mode leaves writable): a host file the worker must not read.
  char outside_tmpl[] = "/var/tmp/belljar-outside-XXXXXX";
  REQUIRE(::mkdtemp(outside_tmpl));
  fs::path outside = outside_tmpl;
  write_file(outside / "host.txt", "host file");
  fs::permissions(outside, fs::perms::all);
  fs::permissions(outside / "host.txt",
                  fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  REQUIRE(read_file(outside / "host.txt") == "host file");  // the control
  if (running_as_root())
    REQUIRE(::chown(ws.path.c_str(), 65534, 65534) == 0);  // no idmapping without a mount ns

  auto policy = test_policy(ws.path, Isolation::degraded);
  policy.pids = 40;
  // A host abstract unix socket the worker must not reach.
  std::string abstract_name = "belljar-test-" + std::to_string(::getpid());
  Fd host_socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, abstract_name.data(), abstract_name.size());
  REQUIRE(::bind(host_socket.get(), reinterpret_cast<sockaddr*>(&addr),
                 static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                        abstract_name.size())) == 0);
  REQUIRE(::listen(host_socket.get(), 1) == 0);
  FakeWorker fake("OUTSIDE = " + nlohmann::json(outside.string()).dump() +
                  "\nABSTRACT = " + nlohmann::json(abstract_name).dump() + "\n" + R"PY(
def write(path):
    with open(path, 'w') as f:
        f.write('x')
    return 'OK'
out = {}
out['env'] = dict(os.environ)
out['status'] = open('/proc/self/status').read()
out['write_workspace'] = attempt(lambda: write('inside.txt'))
out['write_tmp'] = attempt(lambda: write('/tmp/belljar-degraded-probe'))
out['write_outside'] = attempt(lambda: write(OUTSIDE + '/new.txt'))
out['read_outside'] = attempt(lambda: open(OUTSIDE + '/host.txt').read())
out['write_usr'] = attempt(lambda: write('/usr/x'))
out['inet'] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
out['unix'] = attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
out['nproc'] = list(resource.getrlimit(resource.RLIMIT_NPROC))
out['as'] = list(resource.getrlimit(resource.RLIMIT_AS))
out['home_writable'] = attempt(lambda: write(os.environ['HOME'] + '/x'))
libc = ctypes.CDLL(None, use_errno=True)
def unshare_user():
    if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), 'unshare')
out['unshare'] = attempt(unshare_user)
out['signal_parent'] = attempt(lambda: os.kill(os.getppid(), 0))
def abstract():
    s = socket.socket(socket.AF_UNIX)
    s.connect('\0' + ABSTRACT)
out['abstract'] = attempt(abstract)
pid = os.fork()
if pid == 0:
    time.sleep(5)
    os._exit(0)
out['signal_child'] = attempt(lambda: os.kill(pid, signal.SIGKILL))
os.waitpid(pid, 0)
report(out)
)PY");
  WorkerProcess worker = WorkerProcess::start(policy, fake.launch(), without_user_namespaces());
  auto notes = worker.notes();
  auto run = collect(worker);
  ::unlink("/tmp/belljar-degraded-probe");
  std::error_code ec;
  fs::remove_all(outside, ec);
  INFO(run.err);
  auto r = run.result();
  INFO(r.dump(1));

  std::string all_notes;
  for (const auto& n : notes) all_notes += n + "\n";
  INFO(all_notes);
  CHECK(all_notes.find("no namespaces") != std::string::npos);
  CHECK(all_notes.find("secrets in the workspace are not masked") != std::string::npos);
  CHECK(all_notes.find("no pid namespace") != std::string::npos);

  CHECK_FALSE(r["env"].contains("BELLJAR_TEST_SECRET"));
  CHECK(r["env"]["HOME"].get<std::string>().rfind("/tmp/belljar-home-", 0) == 0);
  auto status = r["status"].get<std::string>();
  CHECK(status.find("NoNewPrivs:\t1") != std::string::npos);
  CHECK(status.find("Seccomp:\t2") != std::string::npos);
  CHECK(status.find("CapEff:\t0000000000000000") != std::string::npos);
  if (running_as_root()) {
    CHECK(status.find("Uid:\t65534\t65534\t65534\t65534") != std::string::npos);
    CHECK(status.find("CapBnd:\t0000000000000000") != std::string::npos);
  }
  CHECK(r["write_workspace"]["ok"] == true);
  CHECK(r["write_tmp"]["ok"] == true);
  CHECK(r["home_writable"]["ok"] == true);
  CHECK(r["write_outside"]["errno"] == "EACCES");
  CHECK(r["read_outside"]["errno"] == "EACCES");
  CHECK(r["write_usr"]["ok"] == false);
  CHECK(r["inet"]["errno"] == "EPERM");
  CHECK(r["unix"]["ok"] == true);
  CHECK(r["unshare"]["errno"] == "EPERM");
  if (host_layers().landlock_abi >= 6) {
    CHECK(r["signal_parent"]["errno"] == "EPERM");  // the warden: outside the Landlock domain
    CHECK(r["abstract"]["errno"] == "EPERM");
  }
  CHECK(r["signal_child"]["ok"] == true);
  if (!running_as_root()) {
    CHECK(r["nproc"] == nlohmann::json::array({40, 40}));
    CHECK(r["as"] == nlohmann::json::array({512 << 20, 512 << 20}));
  }
  CHECK(run.exit.exit_code == 0);
}
