// Who the code runs as and what it may do: uid, capabilities, no_new_privs, seccomp, session,
// descriptors, environment. Each probe's expectation is exact; the controls run on the host.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

std::map<std::string, std::string> status_fields(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    fields[line.substr(0, colon)] = value;
  }
  return fields;
}

}  // namespace

TEST_CASE("the worker has uid 1000, no capabilities, no_new_privs and a seccomp filter",
          "[sandbox]") {
  TempDir ws;
  uid_t host_uid_seen = 0;
  FakeWorker fake(
      "report({'status': open('/proc/self/status').read()})\n"
      "time.sleep(60)\n");  // alive, as the worker it reported on, until the test has looked
  WorkerProcess worker = WorkerProcess::start(test_policy(ws.path), fake.launch());
  // The host's view of the worker's uid, once it has reported (so runs as itself), while it lives.
  auto run = collect(worker, 30, [&](WorkerProcess& w, const std::string& frames) {
    if (host_uid_seen != 0 || frames.find("status") == std::string::npos) return;
    struct stat st {};
    REQUIRE(::stat(("/proc/" + std::to_string(w.worker_pid())).c_str(), &st) == 0);
    host_uid_seen = st.st_uid;
    w.kill();
  });
  auto status = status_fields(run.result()["status"].get<std::string>());
  CHECK(status["Uid"] == "1000\t1000\t1000\t1000");
  CHECK(status["Gid"] == "1000\t1000\t1000\t1000");
  CHECK(status["CapInh"] == "0000000000000000");
  CHECK(status["CapPrm"] == "0000000000000000");
  CHECK(status["CapEff"] == "0000000000000000");
  CHECK(status["CapBnd"] == "0000000000000000");
  CHECK(status["CapAmb"] == "0000000000000000");
  CHECK(status["NoNewPrivs"] == "1");
  CHECK(status["Seccomp"] == "2");
  if (running_as_root()) {
    CHECK(status["Groups"].empty());  // root's supplementary groups (gid 0) were dropped
    CHECK(host_uid_seen == 65534);    // never host uid 0: the sandbox user, nobody
  } else {
    CHECK(host_uid_seen == ::getuid());
  }
}

TEST_CASE("refused syscalls fail with their errno, allowed ones work", "[sandbox]") {
  TempDir ws;
  auto run = run_probe(R"PY(
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(*args):
    ctypes.set_errno(0)
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    return errno.errorcode.get(ctypes.get_errno(), 'OK') if r == -1 else 'OK'
out = {}
out['unshare_user'] = sc(272, 0x10000000)
out['unshare_net'] = sc(272, 0x40000000)
out['setns'] = sc(308, 0, 0)
out['mount'] = sc(165, 0, 0, 0, 0, 0)
out['umount2'] = sc(166, 0, 0)
out['pivot_root'] = sc(155, 0, 0)
out['chroot'] = sc(161, 0)
out['ptrace'] = sc(101, 16, 1, 0, 0)
out['process_vm_readv'] = sc(310, 1, 0, 0, 0, 0, 0)
out['bpf'] = sc(321, 0, 0, 0)
out['perf_event_open'] = sc(298, 0, 0, -1, -1, 0)
out['keyctl'] = sc(250, 0, 0, 0, 0, 0)
out['add_key'] = sc(248, 0, 0, 0, 0, 0)
out['userfaultfd'] = sc(323, 0)
out['io_uring_setup'] = sc(425, 1, 0)
out['kexec_load'] = sc(246, 0, 0, 0, 0)
out['init_module'] = sc(175, 0, 0, 0)
out['open_by_handle_at'] = sc(304, 0, 0, 0)
out['swapon'] = sc(167, 0, 0)
out['reboot'] = sc(169, 0, 0, 0, 0)
out['iopl'] = sc(172, 3)
out['settimeofday'] = sc(164, 0, 0)
out['clock_settime'] = sc(227, 0, 0)
out['open_tree'] = sc(428, -100, 0, 0)
out['clone3'] = sc(435, 0, 0)
out['clone_newnet'] = sc(56, 0x40000000 | 17, 0, 0, 0, 0)
out['clone_newuser'] = sc(56, 0x10000000 | 17, 0, 0, 0, 0)
out['tiocsti'] = sc(16, 0, 0x5412, 0)
out['tiocsti_high_bits'] = sc(16, 0, 0x100005412, 0)
out['tioclinux'] = sc(16, 0, 0x541C, 0)
out['x32_getpid'] = sc(0x40000000 | 39)
def sock(family, kind=socket.SOCK_STREAM):
    try:
        socket.socket(family, kind).close(); return 'OK'
    except OSError as e:
        return errno.errorcode[e.errno]
out['af_packet'] = sock(17, socket.SOCK_RAW)
out['af_bluetooth'] = sock(31, socket.SOCK_RAW)
out['af_alg'] = sock(38, socket.SOCK_SEQPACKET)
out['af_vsock'] = sock(40)
out['af_unix'] = sock(socket.AF_UNIX)
out['af_inet'] = sock(socket.AF_INET)
out['af_inet6'] = sock(socket.AF_INET6)
out['af_netlink'] = sock(socket.AF_NETLINK, socket.SOCK_RAW)
# i386 getpid through int 0x80: the foreign ABI is refused as a whole. In a child: a kernel
# built without IA32 emulation answers int 0x80 with SIGSEGV, before seccomp is asked.
import mmap
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(b'\xb8\x14\x00\x00\x00\xcd\x80\xc3')
fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
child = os.fork()
if child == 0:
    os._exit(fn() & 0xff)
_, status = os.waitpid(child, 0)
if os.WIFSIGNALED(status):
    out['int80_getpid'] = 'no ia32 emulation' if os.WTERMSIG(status) == signal.SIGSEGV else os.WTERMSIG(status)
else:
    out['int80_getpid'] = -1 if os.WEXITSTATUS(status) == 0xff else os.WEXITSTATUS(status)
# No setuid/setgid files (they would land on the host as the workspace owner).
open('plain', 'w').close()
def fsafe(fn):
    try:
        fn(); return 'OK'
    except OSError as e:
        return errno.errorcode[e.errno]
out['chmod_setuid'] = fsafe(lambda: os.chmod('plain', 0o4755))
out['chmod_setgid'] = fsafe(lambda: os.chmod('plain', 0o2755))
out['fchmod_setuid'] = fsafe(lambda: os.fchmod(os.open('plain', os.O_RDONLY), 0o4755))
out['create_setuid'] = fsafe(lambda: os.close(os.open('suid', os.O_CREAT | os.O_WRONLY, 0o4755)))
out['tmpfile_setuid'] = fsafe(lambda: os.close(os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o4755)))
out['mknod_setuid'] = fsafe(lambda: os.mknod('node', 0o104755))
out['openat2'] = sc(437, -100, 0, 0, 0)
out['chmod_plain'] = fsafe(lambda: os.chmod('plain', 0o755))
out['create_plain'] = fsafe(lambda: os.close(os.open('created', os.O_CREAT | os.O_WRONLY, 0o644)))
out['open_existing'] = fsafe(lambda: os.close(os.open('plain', os.O_RDONLY, 0o4755)))
# Ordinary process and thread creation still work (clone without namespace flags).
pid = os.fork()
if pid == 0:
    os._exit(7)
out['fork'] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
import threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
out['thread'] = 'OK'
import subprocess
out['subprocess'] = subprocess.run(['/bin/sh', '-c', 'echo hi'], capture_output=True, text=True).stdout
report(out)
)PY",
                       test_policy(ws.path));
  INFO(run.err);
  auto r = run.result();
  for (const char* name : {"unshare_user",
                           "unshare_net",
                           "setns",
                           "mount",
                           "umount2",
                           "pivot_root",
                           "chroot",
                           "ptrace",
                           "process_vm_readv",
                           "bpf",
                           "perf_event_open",
                           "keyctl",
                           "add_key",
                           "userfaultfd",
                           "io_uring_setup",
                           "kexec_load",
                           "init_module",
                           "open_by_handle_at",
                           "swapon",
                           "reboot",
                           "iopl",
                           "settimeofday",
                           "clock_settime",
                           "open_tree",
                           "clone_newnet",
                           "clone_newuser",
                           "tiocsti",
                           "tiocsti_high_bits",
                           "tioclinux",
                           "x32_getpid",
                           "af_packet",
                           "af_bluetooth",
                           "af_alg",
                           "af_vsock"}) {
    INFO(name);
    CHECK(r[name] == "EPERM");
  }
  for (const char* name : {"chmod_setuid", "chmod_setgid", "fchmod_setuid", "create_setuid",
                           "tmpfile_setuid", "mknod_setuid"}) {
    INFO(name);
    CHECK(r[name] == "EPERM");
  }
  CHECK(r["openat2"] == "ENOSYS");
  CHECK(r["chmod_plain"] == "OK");
  CHECK(r["create_plain"] == "OK");
  CHECK(r["open_existing"] == "OK");  // a mode without O_CREAT is ignored, and not refused
  CHECK(r["clone3"] == "ENOSYS");
  // -EPERM in eax; or no 32-bit ABI in this kernel at all
  CHECK((r["int80_getpid"] == -1 || r["int80_getpid"] == "no ia32 emulation"));
  for (const char* name : {"af_unix", "af_inet", "af_inet6", "af_netlink", "thread"}) {
    INFO(name);
    CHECK(r[name] == "OK");
  }
  CHECK(r["fork"] == 7);
  CHECK(r["subprocess"] == "hi\n");
}

TEST_CASE("the worker is a session leader without a terminal, with core dumps off", "[sandbox]") {
  TempDir ws;
  auto run = run_probe(R"PY(
out = {}
out['sid_is_pid'] = os.getsid(0) == os.getpid()
out['pgid_is_pid'] = os.getpgid(0) == os.getpid()
out['tty'] = attempt(lambda: os.open('/dev/tty', os.O_RDWR))
out['core'] = list(resource.getrlimit(resource.RLIMIT_CORE))
out['nofile'] = list(resource.getrlimit(resource.RLIMIT_NOFILE))
out['fsize'] = list(resource.getrlimit(resource.RLIMIT_FSIZE))
out['fds'] = sorted(int(x) for x in os.listdir('/proc/self/fd'))
out['umask'] = os.umask(0o22)
report(out)
)PY",
                       [&] {
                         auto p = test_policy(ws.path);
                         p.file_size_bytes = 5 << 20;
                         return p;
                       }());
  auto r = run.result();
  CHECK(r["sid_is_pid"] == true);
  CHECK(r["pgid_is_pid"] == true);
  CHECK(r["tty"]["ok"] == false);
  CHECK(r["core"] == nlohmann::json::array({0, 0}));
  CHECK(r["nofile"] == nlohmann::json::array({4096, 4096}));
  CHECK(r["fsize"] == nlohmann::json::array({5 << 20, 5 << 20}));
  // 0-4 are the documented ones (4: the debug channel); the sixth is listdir's own handle on
  // /proc/self/fd.
  CHECK(r["fds"] == nlohmann::json::array({0, 1, 2, 3, 4, 5}));
  CHECK(r["umask"] == 0022);
}

TEST_CASE("descriptors the supervisor leaks do not reach the worker", "[sandbox]") {
  TempDir ws;
  write_file(ws / "leak.txt", "leaked");
  int leaked = ::open((ws / "leak.txt").c_str(), O_RDONLY);  // no O_CLOEXEC, on purpose
  REQUIRE(leaked >= 0);
  auto run = run_probe("report(sorted(int(x) for x in os.listdir('/proc/self/fd')))\n",
                       test_policy(ws.path));
  ::close(leaked);
  CHECK(run.result() == nlohmann::json::array({0, 1, 2, 3, 4, 5}));
}

TEST_CASE("the environment holds the allowlist only", "[sandbox]") {
  TempDir ws;
  ::setenv("BELLJAR_TEST_SECRET", "do-not-pass", 1);
  ::setenv("BELLJAR_TEST_PASSED", "passed", 1);
  ::setenv("LANG", "C.UTF-8", 1);
  auto policy = test_policy(ws.path);
  policy.pass_env = {"BELLJAR_TEST_PASSED"};
  policy.set_env = {{"BELLJAR_TEST_SET", "value with spaces"}};
  auto run = run_probe("report(dict(os.environ))\n", policy);
  ::unsetenv("BELLJAR_TEST_SECRET");
  ::unsetenv("BELLJAR_TEST_PASSED");
  auto env = run.result();
  CHECK_FALSE(env.contains("BELLJAR_TEST_SECRET"));
  CHECK(env["BELLJAR_TEST_PASSED"] == "passed");
  CHECK(env["BELLJAR_TEST_SET"] == "value with spaces");
  CHECK(env["HOME"] == "/home/sandbox");
  CHECK(env["LANG"] == "C.UTF-8");
  for (auto& [name, value] : env.items()) {
    INFO(name);
    bool allowed = name == "PATH" || name == "HOME" || name == "USER" || name == "LOGNAME" ||
                   name == "LANG" || name == "TZ" || name == "TERM" || name.rfind("LC_", 0) == 0 ||
                   name.rfind("BELLJAR_TEST_", 0) == 0;
    CHECK(allowed);
  }
}
