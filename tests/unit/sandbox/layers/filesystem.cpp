// What the sandbox sees of the filesystem: a root assembled from read-only binds, one writable
// workspace, private /tmp, /dev/shm and home, masked secrets, and nothing else of the host.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

std::set<std::string> names(const nlohmann::json& list) {
  std::set<std::string> out;
  for (const auto& item : list) out.insert(item.get<std::string>());
  return out;
}

bool subset(const std::set<std::string>& a, const std::set<std::string>& b) {
  for (const auto& x : a)
    if (!b.count(x)) return false;
  return true;
}

}  // namespace

TEST_CASE("the root holds only what Python needs", "[sandbox]") {
  TempDir ws;
  TempDir outside("belljar-outside");
  write_file(outside / "host-only.txt", "host");
  auto run = run_probe(R"PY(
out = {}
out['root'] = sorted(os.listdir('/'))
out['etc'] = sorted(os.listdir('/etc'))
out['home'] = sorted(os.listdir('/home'))
out['dev'] = sorted(os.listdir('/dev'))
out['tmp'] = sorted(os.listdir('/tmp'))
out['absent'] = {p: os.path.lexists(p) for p in ['/root', '/run', '/var', '/sys', '/boot', '/srv', '/opt', '/mnt', '/media', '/var/run', '/run/user', '/dev/sda', '/dev/vda', '/dev/tty', '/dev/console', '/dev/mem', '/dev/kmsg']}
out['outside'] = os.path.lexists(sys.argv[0])
out['passwd'] = open('/etc/passwd').read()
import pwd, getpass
out['whoami'] = pwd.getpwuid(os.getuid()).pw_name
out['home_env'] = os.path.expanduser('~')
out['hostname'] = socket.gethostname()
report(out)
)PY",
                       test_policy(ws.path));
  INFO(run.err);
  auto r = run.result();
  CHECK(subset(names(r["root"]), {"bin", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32",
                                  "proc", "sbin", "tmp", "usr"}));
  CHECK(subset(names(r["etc"]), {"passwd",        "group",           "hosts",      "hostname",
                                 "nsswitch.conf", "ld.so.cache",     "ld.so.conf", "ld.so.conf.d",
                                 "ssl",           "ca-certificates", "pki",        "fonts",
                                 "localtime",     "timezone",        "mime.types", "debian_version",
                                 "alternatives",  "protocols",       "services",   "os-release",
                                 "matplotlibrc",  "python3",         "python3.11"}));
  CHECK(names(r["home"]) == std::set<std::string>{"sandbox"});
  CHECK(names(r["dev"]) == std::set<std::string>{"fd", "full", "null", "random", "shm", "stderr",
                                                 "stdin", "stdout", "urandom", "zero"});
  // /tmp is private: only the mount points of the workspace and the worker package show, both
  // made in the temp folder — two entries when that is /tmp, its own one when it lies below
  // (scripts/test.sh gives the suites a TMPDIR of their own), none when it is elsewhere.
  std::string temp = fs::temp_directory_path().lexically_normal().string();
  size_t mount_points = temp == "/tmp" || temp == "/tmp/" ? 2 : temp.rfind("/tmp/", 0) == 0 ? 1 : 0;
  CHECK(names(r["tmp"]).size() == mount_points);
  for (auto& [path, exists] : r["absent"].items()) {
    INFO(path);
    CHECK(exists == false);
  }
  CHECK(r["whoami"] == "sandbox");
  CHECK(r["home_env"] == "/home/sandbox");
  CHECK(r["hostname"] == "belljar");
  CHECK(r["passwd"].get<std::string>().find("root") == std::string::npos);
}

TEST_CASE("only the workspace, /tmp, /dev/shm and the home are writable", "[sandbox]") {
  TempDir ws;
  TempDir extra("belljar-ro");
  write_file(extra / "data.txt", "read me");
  auto policy = test_policy(ws.path);
  policy.read_only = {extra.path};
  FakeWorker fake("EXTRA = " + nlohmann::json(extra.path.string()).dump() + "\n" + R"PY(
def write(path):
    with open(path, 'w') as f:
        f.write('x')
    return 'OK'
targets = {'root': '/x', 'usr': '/usr/x', 'etc': '/etc/x', 'etc_passwd': '/etc/passwd', 'dev': '/dev/x',
           'proc_sys': '/proc/sys/kernel/hostname', 'package': sys.path[0] + '/x', 'ro_extra': EXTRA + '/x',
           'workspace': os.getcwd() + '/new.txt', 'tmp': '/tmp/x', 'shm': '/dev/shm/x', 'home': '/home/sandbox/x',
           'dev_null': '/dev/null'}
out = {name: attempt(lambda p=path: write(p)) for name, path in targets.items()}
out['ro_extra_read'] = open(EXTRA + '/data.txt').read()
out['chmod_root'] = attempt(lambda: os.chmod('/', 0o777))
out['mkdir_root'] = attempt(lambda: os.mkdir('/newdir'))
report(out)
)PY");
  WorkerProcess worker = WorkerProcess::start(policy, fake.launch());
  auto result = collect(worker).result();
  INFO(result.dump(1));
  for (const char* name : {"root", "usr", "etc", "etc_passwd", "dev", "package", "ro_extra",
                           "chmod_root", "mkdir_root"}) {
    INFO(name);
    CHECK(result[name]["errno"] == "EROFS");
  }
  CHECK(result["proc_sys"]["ok"] == false);
  for (const char* name : {"workspace", "tmp", "shm", "home", "dev_null"}) {
    INFO(name);
    CHECK(result[name]["ok"] == true);
  }
  CHECK(result["ro_extra_read"] == "read me");
  CHECK(read_file(ws / "new.txt") == "x");
  CHECK_FALSE(fs::exists(extra / "x"));
}

TEST_CASE("secrets in the workspace are masked inside and untouched on the host", "[sandbox]") {
  TempDir ws;
  write_file(ws / ".env", "TOKEN=top-secret");
  write_file(ws / "app/.env.production", "DB=secret");
  write_file(ws / ".ssh/id_ed25519", "KEY");
  write_file(ws / ".aws/credentials", "AWS");
  write_file(ws / "certs/server.pem", "PEM");
  write_file(ws / "certs/server.key", "KEY");
  write_file(ws / ".docker/config.json", "{\"auths\":{}}");
  write_file(ws / ".docker/other.json", "{}");
  write_file(ws / ".netrc", "machine x");
  write_file(ws / "private/plan.txt", "custom hidden");
  write_file(ws / "notes.txt", "visible");
  fs::create_symlink(".env", ws / "env-link");
  auto policy = test_policy(ws.path);
  policy.hide = {"private"};
  auto run = run_probe(R"PY(
def read(path):
    with open(path) as f:
        return f.read()
paths = ['.env', 'app/.env.production', '.ssh/id_ed25519', '.aws/credentials', 'certs/server.pem',
         'certs/server.key', '.docker/config.json', '.docker/other.json', '.netrc', 'private/plan.txt',
         'notes.txt', 'env-link']
out = {p: attempt(lambda p=p: read(p)) for p in paths}
out['ls_ssh'] = attempt(lambda: os.listdir('.ssh'))
out['write_env'] = attempt(lambda: open('.env', 'w').write('stolen'))
out['unlink_env'] = attempt(lambda: os.unlink('.env'))
out['rename_env'] = attempt(lambda: os.rename('.env', 'moved'))
out['chmod_env'] = attempt(lambda: os.chmod('.env', 0o644))
out['size_env'] = os.stat('.env').st_size
report(out)
)PY",
                       policy);
  INFO(run.err);
  auto r = run.result();
  INFO(r.dump(1));
  for (const char* masked :
       {".env", "app/.env.production", ".ssh/id_ed25519", ".aws/credentials", "certs/server.pem",
        "certs/server.key", ".docker/config.json", ".netrc", "private/plan.txt", "env-link"}) {
    INFO(masked);
    CHECK(r[masked]["ok"] == false);
    CHECK((r[masked]["errno"] == "EACCES" || r[masked]["errno"] == "ENOTDIR"));
  }
  CHECK(r["notes.txt"]["value"] == "visible");
  CHECK(r[".docker/other.json"]["value"] == "{}");
  CHECK(r["ls_ssh"]["errno"] == "EACCES");
  CHECK(r["write_env"]["ok"] == false);
  // Refused before the mask is reached: .env is a dot-path, which the workspace broker closes.
  CHECK(r["unlink_env"]["errno"] == "EACCES");
  CHECK(r["rename_env"]["errno"] == "EACCES");
  CHECK(r["chmod_env"]["errno"] == "EPERM");
  CHECK(r["size_env"] == 0);
  // The host's files are as they were.
  CHECK(read_file(ws / ".env") == "TOKEN=top-secret");
  CHECK(read_file(ws / ".ssh/id_ed25519") == "KEY");
  CHECK(read_file(ws / "private/plan.txt") == "custom hidden");
  CHECK(read_file(ws / ".docker/config.json") == "{\"auths\":{}}");
  CHECK(fs::is_symlink(ws / "env-link"));
}

TEST_CASE("a symlink in the workspace cannot reach a host file outside it", "[sandbox]") {
  TempDir parent("belljar-parent");
  fs::path ws = parent / "ws";
  fs::create_directories(ws);
  write_file(parent / "sibling-secret.txt", "sibling");
  TempDir outside("belljar-outside");
  write_file(outside / "secret.txt", "outside");
  fs::create_symlink(outside / "secret.txt", ws / "abs-link");
  fs::create_symlink("../sibling-secret.txt", ws / "rel-link");
  fs::create_symlink("/etc/shadow", ws / "shadow-link");
  fs::create_symlink("/root", ws / "root-link");
  // The control: on the host every link reaches its target.
  REQUIRE(read_file(ws / "abs-link") == "outside");
  REQUIRE(read_file(ws / "rel-link") == "sibling");
  auto run = run_probe(R"PY(
def read(path):
    with open(path) as f:
        return f.read()
out = {p: attempt(lambda p=p: read(p)) for p in ['abs-link', 'rel-link', 'shadow-link']}
out['root-link'] = attempt(lambda: os.listdir('root-link'))
out['parent'] = sorted(os.listdir('..'))
report(out)
)PY",
                       test_policy(ws));
  auto r = run.result();
  INFO(r.dump(1));
  for (const char* link : {"abs-link", "rel-link", "shadow-link", "root-link"}) {
    INFO(link);
    CHECK(r[link]["errno"] == "ENOENT");
  }
  CHECK(names(r["parent"]) == std::set<std::string>{"ws"});
}

TEST_CASE("the sandbox has its own pid and network namespaces", "[sandbox]") {
  TempDir ws;
  auto run = run_probe(R"PY(
out = {}
out['ppid'] = os.getppid()
out['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
out['init'] = open('/proc/1/cmdline', 'rb').read().split(b'\0')[0].decode()
out['init_name'] = open('/proc/1/comm').read().strip()
out['init_caps'] = [l.split()[1] for l in open('/proc/1/status') if l.startswith(('CapEff', 'CapPrm', 'CapBnd'))]
out['interfaces'] = [name for _, name in socket.if_nameindex()]
s = socket.socket(); s.settimeout(2)
out['egress'] = attempt(lambda: s.connect(('1.1.1.1', 443)))
server = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen(1)
client = socket.create_connection(server.getsockname(), timeout=2)
out['loopback'] = 'OK'
out['kill_init'] = attempt(lambda: os.kill(1, signal.SIGKILL))
# Dropped as it is sent: a SIGKILL that had been queued would be pending in init until it died
# of it, and the worker with it (no report then).
out['init_alive'] = os.path.exists('/proc/1')
masks = [l.split()[1] for l in open('/proc/1/status') if l.startswith(('SigPnd', 'ShdPnd'))]
out['kill_pending'] = any(int(m, 16) & (1 << (signal.SIGKILL - 1)) for m in masks)
report(out)
)PY",
                       test_policy(ws.path));
  auto r = run.result();
  INFO(r.dump(1));
  CHECK(r["ppid"] == 1);
  CHECK(r["pids"].size() <= 2);        // init and the worker
  CHECK(r["init"] == "belljar-jail");  // the jail helper, not a copy of the supervisor
  CHECK(r["init_name"] == "belljar-init");
  CHECK(r["init_caps"] ==
        nlohmann::json::array({"0000000000000000", "0000000000000000", "0000000000000000"}));
  CHECK(r["interfaces"] == nlohmann::json::array({"lo"}));
  CHECK(r["egress"]["errno"] == "ENETUNREACH");
  CHECK(r["loopback"] == "OK");
  CHECK(r["init_alive"] == true);  // pid 1 cannot be killed from inside its namespace
  CHECK(r["kill_pending"] == false);
}

TEST_CASE("files the worker creates keep the workspace owner on the host", "[sandbox]") {
  TempDir ws;
  auto run = run_probe(R"PY(
with open('made-inside.txt', 'w') as f:
    f.write('hello')
os.mkdir('made-dir')
report({'owner_inside': os.stat('.').st_uid, 'file_owner_inside': os.stat('made-inside.txt').st_uid})
)PY",
                       test_policy(ws.path));
  auto r = run.result();
  CHECK(r["owner_inside"] == 1000);
  CHECK(r["file_owner_inside"] == 1000);
  struct stat ws_st {
  }, file_st{}, dir_st{};
  REQUIRE(::stat(ws.path.c_str(), &ws_st) == 0);
  REQUIRE(::stat((ws / "made-inside.txt").c_str(), &file_st) == 0);
  REQUIRE(::stat((ws / "made-dir").c_str(), &dir_st) == 0);
  CHECK(file_st.st_uid == ws_st.st_uid);  // as root: uid 0 on disk through the idmapped mount
  CHECK(dir_st.st_uid == ws_st.st_uid);
  CHECK(read_file(ws / "made-inside.txt") == "hello");
}

TEST_CASE("an interpreter under a home directory is bound without the rest of the home",
          "[sandbox]") {
  const char* pyenv_python = "/root/.pyenv/versions/3.11.7/bin/python3";
  if (!running_as_root() || !fs::exists(pyenv_python)) {
    WARN("belljar-test-skipped: needs root and " << pyenv_python);  // counted by ctest
    return;
  }
  TempDir ws;
  FakeWorker fake(R"PY(
report({'prefix': sys.prefix, 'root': sorted(os.listdir('/root')), 'version': sys.version.split()[0],
        'ssl': attempt(lambda: __import__('ssl').OPENSSL_VERSION)})
)PY");
  auto policy = test_policy(ws.path);
  policy.python = pyenv_python;
  WorkerProcess worker = WorkerProcess::start(policy, test_launch(pyenv_python, fake.package.path));
  auto run = collect(worker);
  INFO(run.err);
  auto r = run.result();
  CHECK(r["prefix"] == "/root/.pyenv/versions/3.11.7");
  CHECK(r["root"] == nlohmann::json::array({".pyenv"}));
  CHECK(r["version"] == "3.11.7");
  CHECK(r["ssl"]["ok"] == true);
}
