// The worker's exec options, built once for the warden (landlock mode) and for jail init
// (namespaces mode): every limit the spec carries reaches the rlimits, a cap a cgroup holds is
// not doubled by an rlimit, and only landlock mode switches the user, refuses inet sockets and
// confines the worker to the binds and its session directory.
#include "sandbox/jail/worker_exec.hpp"

#include <algorithm>
#include <catch2/catch.hpp>

using namespace belljar;

namespace {

JailSpec spec_of(JailSpec::Mode mode) {
  JailSpec spec;
  spec.mode = mode;
  spec.host_root = true;
  spec.host_uid = 65534;
  spec.host_gid = 65533;
  spec.binds = {{"/usr", "/usr", JailBind::Kind::read_only},
                {"/home/learner/work", "/home/learner/work", JailBind::Kind::workspace},
                {"/dev/null", "/dev/null", JailBind::Kind::device}};
  spec.broker = true;
  spec.memory_bytes = 3ull << 30;
  spec.pids = 77;
  spec.file_size_bytes = 5ull << 20;
  spec.open_files = 321;
  return spec;
}

bool holds(const std::vector<std::string>& paths, const std::string& path) {
  return std::find(paths.begin(), paths.end(), path) != paths.end();
}

}  // namespace

TEST_CASE("without a cgroup every limit of the spec is an rlimit of the worker", "[worker_exec]") {
  for (auto mode : {JailSpec::Mode::namespaces, JailSpec::Mode::landlock}) {
    INFO((mode == JailSpec::Mode::landlock ? "landlock" : "namespaces"));
    JailSpec spec = spec_of(mode);
    WorkerExecOptions options = worker_exec_options(spec, CgroupCaps{}, 9, "/tmp/belljar-session");
    CHECK(options.limits.file_size == spec.file_size_bytes);
    CHECK(options.limits.open_files == 321);
    CHECK(options.limits.memory == spec.memory_bytes);
    CHECK(options.limits.processes == 77);
    CHECK(options.seccomp.broker);
    CHECK(options.seccomp.cpu_by_process_tree);
    CHECK(options.broker_channel == 9);
  }
}

TEST_CASE("a cap the cgroup holds is not doubled by an rlimit", "[worker_exec]") {
  JailSpec spec = spec_of(JailSpec::Mode::namespaces);
  spec.broker = false;
  WorkerExecOptions all = worker_exec_options(spec, CgroupCaps{true, true, true}, -1, "");
  CHECK(all.limits.memory == 0);
  CHECK(all.limits.processes == 0);
  CHECK_FALSE(all.seccomp.cpu_by_process_tree);
  CHECK_FALSE(all.seccomp.broker);
  CHECK(all.broker_channel == -1);
  // Per-process limits no cgroup holds stay whatever the cgroup caps.
  CHECK(all.limits.file_size == spec.file_size_bytes);
  CHECK(all.limits.open_files == 321);

  WorkerExecOptions memory_only = worker_exec_options(spec, CgroupCaps{true, false, false}, -1, "");
  CHECK(memory_only.limits.memory == 0);
  CHECK(memory_only.limits.processes == 77);
  CHECK(memory_only.seccomp.cpu_by_process_tree);
  WorkerExecOptions pids_only = worker_exec_options(spec, CgroupCaps{false, true, false}, -1, "");
  CHECK(pids_only.limits.memory == spec.memory_bytes);
  CHECK(pids_only.limits.processes == 0);
}

TEST_CASE("namespaces mode leaves identity, inet and the filesystem to the jail", "[worker_exec]") {
  WorkerExecOptions options =
      worker_exec_options(spec_of(JailSpec::Mode::namespaces), CgroupCaps{}, 9, "");
  CHECK_FALSE(options.switch_user);
  CHECK(options.uid == 0);
  CHECK(options.gid == 0);
  CHECK_FALSE(options.seccomp.refuse_inet);
  CHECK_FALSE(options.landlock);
  CHECK(options.landlock_rules.read_only.empty());
  CHECK(options.landlock_rules.read_write.empty());
}

TEST_CASE("landlock mode switches the user, refuses inet and confines the worker",
          "[worker_exec]") {
  JailSpec spec = spec_of(JailSpec::Mode::landlock);
  WorkerExecOptions options = worker_exec_options(spec, CgroupCaps{}, 9, "/tmp/belljar-session-x");
  CHECK(options.switch_user);
  CHECK(options.uid == 65534);
  CHECK(options.gid == 65533);
  CHECK(options.seccomp.refuse_inet);
  REQUIRE(options.landlock);
  const auto& rules = options.landlock_rules;
  CHECK(holds(rules.read_only, "/usr"));
  CHECK_FALSE(holds(rules.read_write, "/usr"));
  CHECK(holds(rules.read_write, "/home/learner/work"));
  CHECK(holds(rules.read_write, "/dev/null"));
  for (const char* path : {"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf",
                           "/etc/hostname", "/proc", "/dev"}) {
    INFO(path);
    CHECK(holds(rules.read_only, path));
  }
  CHECK(rules.read_write.back() == "/tmp/belljar-session-x");
  // The host's /tmp and /dev/shm are shared with every process on it: never writable.
  CHECK_FALSE(holds(rules.read_write, "/tmp"));
  CHECK_FALSE(holds(rules.read_write, "/dev/shm"));
  CHECK(rules.read_write.size() == 3);

  // A kernel that is not root is already the sandbox's identity: no switch.
  spec.host_root = false;
  CHECK_FALSE(worker_exec_options(spec, CgroupCaps{}, 9, "/tmp/s").switch_user);
}
