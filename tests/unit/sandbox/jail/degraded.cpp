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
  host.fresh_proc = false;
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
  // A host file the worker must not read, and one in the host's /tmp (where a home or Jupyter's
  // runtime directory may be), which it must neither read nor add to.
  char host_tmp_tmpl[] = "/tmp/belljar-host-tmp-XXXXXX";
  REQUIRE(::mkdtemp(host_tmp_tmpl));
  fs::path host_tmp = host_tmp_tmpl;
  write_file(host_tmp / "key.json", "host tmp file");
  fs::permissions(host_tmp, fs::perms::all);
  fs::permissions(host_tmp / "key.json", fs::perms::all);
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
                  "\nHOST_TMP = " + nlohmann::json(host_tmp.string()).dump() +
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
out['read_host_tmp'] = attempt(lambda: open(HOST_TMP + '/key.json').read())
out['list_tmp'] = attempt(lambda: os.listdir('/tmp'))
out['tmpdir_writable'] = attempt(lambda: write(os.environ['TMPDIR'] + '/x'))
out['dev_shm'] = attempt(lambda: write('/dev/shm/belljar-degraded-probe'))
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
  bool tmp_written = fs::exists("/tmp/belljar-degraded-probe");
  bool shm_written = fs::exists("/dev/shm/belljar-degraded-probe");
  ::unlink("/tmp/belljar-degraded-probe");
  ::unlink("/dev/shm/belljar-degraded-probe");
  std::error_code ec;
  fs::remove_all(outside, ec);
  fs::remove_all(host_tmp, ec);
  INFO(run.err);
  auto r = run.result();
  INFO(r.dump(1));

  std::string all_notes;
  for (const auto& n : notes) all_notes += n + "\n";
  INFO(all_notes);
  CHECK(all_notes.find("no mount namespace: secrets in the workspace cannot be masked") !=
        std::string::npos);
  CHECK(all_notes.find("no pid namespace: the worker sees the host's processes") !=
        std::string::npos);

  CHECK_FALSE(r["env"].contains("BELLJAR_TEST_SECRET"));
  // A private session directory: home and TMPDIR in it, the host's /tmp and /dev/shm closed.
  std::string home = r["env"]["HOME"].get<std::string>();
  CHECK(home.rfind("/tmp/belljar-session-", 0) == 0);
  CHECK(home.substr(home.size() - 5) == "/home");
  CHECK(r["env"]["TMPDIR"] == home.substr(0, home.size() - 5) + "/tmp");
  auto status = r["status"].get<std::string>();
  CHECK(status.find("NoNewPrivs:\t1") != std::string::npos);
  CHECK(status.find("Seccomp:\t2") != std::string::npos);
  CHECK(status.find("CapEff:\t0000000000000000") != std::string::npos);
  if (running_as_root()) {
    CHECK(status.find("Uid:\t65534\t65534\t65534\t65534") != std::string::npos);
    CHECK(status.find("CapBnd:\t0000000000000000") != std::string::npos);
  }
  CHECK(r["write_workspace"]["ok"] == true);
  CHECK(r["write_tmp"]["errno"] == "EACCES");
  CHECK_FALSE(tmp_written);
  CHECK(r["read_host_tmp"]["errno"] == "EACCES");
  CHECK(r["list_tmp"]["errno"] == "EACCES");
  CHECK(r["dev_shm"]["ok"] == false);
  CHECK_FALSE(shm_written);
  CHECK(r["tmpdir_writable"]["ok"] == true);
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

TEST_CASE("degraded mode refuses a workspace holding a secret it could not mask", "[sandbox]") {
  TempDir ws;
  if (running_as_root()) REQUIRE(::chown(ws.path.c_str(), 65534, 65534) == 0);
  FakeWorker fake("report('ran')\n");
  SECTION("a .env file") {
    write_file(ws.path / "notes" / ".env", "OPENAI_API_KEY=sk-x\n");
    CHECK_THROWS_WITH(WorkerProcess::start(test_policy(ws.path, Isolation::degraded), fake.launch(),
                                           without_user_namespaces()),
                      Catch::StartsWith("the workspace holds notes/.env (.env), which "
                                        "--isolation degraded cannot mask") &&
                          Catch::EndsWith("or run where namespaces are allowed"));
  }
  SECTION("Jupyter's runtime directory, in a workspace that is a home") {
    write_file(ws.path / ".local/share/jupyter/runtime/kernel-1.json", "{\"key\": \"k\"}");
    CHECK_THROWS_WITH(WorkerProcess::start(test_policy(ws.path, Isolation::degraded), fake.launch(),
                                           without_user_namespaces()),
                      Catch::StartsWith("the workspace holds .local/share/jupyter/runtime "
                                        "(jupyter/runtime)"));
  }
  SECTION("the kernel's connection file, wherever in the workspace it is") {
    write_file(ws.path / "run" / "conn.json", "{\"key\": \"k\"}");
    auto policy = test_policy(ws.path, Isolation::degraded);
    policy.kernel_files.push_back(ws.path / "run" / "conn.json");
    CHECK_THROWS_WITH(WorkerProcess::start(policy, fake.launch(), without_user_namespaces()),
                      Catch::StartsWith("the workspace holds run (/run)"));
  }
  SECTION("the control: the same workspace without them starts") {
    write_file(ws.path / "notes" / "readme.txt", "nothing secret\n");
    WorkerProcess worker = WorkerProcess::start(test_policy(ws.path, Isolation::degraded),
                                                fake.launch(), without_user_namespaces());
    CHECK(collect(worker).exit.exit_code == 0);
  }
}
