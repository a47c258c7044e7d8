#include "sandbox/jail_client/host_check.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/layers/landlock.hpp"
#include "sandbox/layers/user_namespace.hpp"
#include "sandbox/os/setup_error.hpp"
#include "sandbox/os/small_file.hpp"

namespace belljar {

namespace {

std::string read_first_line(const std::string& path) {
  std::string text = read_small_file(path, 4096);
  return text.substr(0, text.find('\n'));
}

struct NamespaceProbe {
  int user_errno = 0;
  int errnos[6] = {};  // mount, pid, net, ipc, uts, cgroup
  int proc_errno = 0;  // mounting a fresh /proc in them, as the jail's init does
};

constexpr int kProbeFlags[6] = {CLONE_NEWNS,  CLONE_NEWPID, CLONE_NEWNET,
                                CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP};
constexpr const char* kProbeNames[6] = {"CLONE_NEWNS",  "CLONE_NEWPID", "CLONE_NEWNET",
                                        "CLONE_NEWIPC", "CLONE_NEWUTS", "CLONE_NEWCGROUP"};

// The child only calls unshare, write and _exit: safe after fork in a threaded process.
NamespaceProbe probe_namespaces() {
  NamespaceProbe result;
  result.user_errno = ENOSYS;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return result;
  pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  if (child == 0) {
    NamespaceProbe probe;
    if (::unshare(CLONE_NEWUSER) != 0) {
      probe.user_errno = errno;
    } else {
      for (int i = 0; i < 6; ++i) probe.errnos[i] = ::unshare(kProbeFlags[i]) == 0 ? 0 : errno;
      // A container that masks parts of its /proc (kcore, sysrq-trigger, ...) lets no fresh
      // procfs be mounted below it (the kernel's mount_too_revealing): the jail could not stand.
      if (probe.errnos[0] == 0 && probe.errnos[1] == 0) {
        pid_t first = ::fork();  // pid 1 of the new pid namespace
        if (first == 0) {
          int err = 0;
          if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
              ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
            err = errno;
          _exit(err);
        }
        int status = 0;
        while (first > 0 && ::waitpid(first, &status, 0) < 0 && errno == EINTR) {
        }
        probe.proc_errno = first < 0 ? errno : WIFEXITED(status) ? WEXITSTATUS(status) : ECHILD;
      }
    }
    ssize_t ignored = ::write(fds[1], &probe, sizeof probe);
    (void)ignored;
    _exit(0);
  }
  ::close(fds[1]);
  if (::read(fds[0], &result, sizeof result) != sizeof result) result.user_errno = ECHILD;
  ::close(fds[0]);
  int status;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

std::string userns_problem(int err) {
  std::string why = "unshare(CLONE_NEWUSER): " + errno_text(err);
  if (read_first_line("/proc/sys/kernel/unprivileged_userns_clone") == "0")
    return "user namespaces are disabled (sysctl kernel.unprivileged_userns_clone=0)";
  if (read_first_line("/proc/sys/user/max_user_namespaces") == "0")
    return "user namespaces are disabled (sysctl user.max_user_namespaces=0)";
  if (read_first_line("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1")
    return "AppArmor restricts unprivileged user namespaces (sysctl "
           "kernel.apparmor_restrict_unprivileged_userns=1)";
  if (err == EPERM)
    return "user namespaces are refused (" + why +
           "; a container's seccomp profile or an LSM forbids them)";
  return "user namespaces are unavailable (" + why + ")";
}

// Filters with errno actions, and user notification (the workspace broker's, Linux 5.0+).
bool seccomp_available() {
  if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL) return false;
  std::string actions = read_first_line("/proc/sys/kernel/seccomp/actions_avail");
  return actions.empty() || (actions.find("errno") != std::string::npos &&
                             actions.find("user_notif") != std::string::npos);
}

// As root with a workspace the sandbox user does not own: try the idmapped copy for real.
std::string idmap_problem(const Policy& policy, uid_t sandbox_uid, gid_t sandbox_gid) {
  struct stat st {};
  std::string workspace = policy.workspace.empty() ? std::string(".") : policy.workspace.string();
  if (::stat(workspace.c_str(), &st) != 0) return {};  // starting reports the missing workspace
  if (st.st_uid == sandbox_uid && st.st_gid == sandbox_gid) return {};
  try {
    Fd userns = make_idmap_userns(st.st_uid, sandbox_uid, st.st_gid, sandbox_gid);
    Fd tree(::open_tree(AT_FDCWD, workspace.c_str(),
                        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
    if (!tree) throw_errno("open_tree(" + workspace + ")");
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_IDMAP;
    attr.userns_fd = static_cast<uint64_t>(userns.get());
    if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
      throw_errno("mount_setattr(" + workspace + ", MOUNT_ATTR_IDMAP)");
  } catch (const SetupError& e) {
    return e.what();
  }
  return {};
}

void sandbox_identity(const Policy& policy, uid_t& uid, gid_t& gid, std::string& name) {
  name = policy.sandbox_user.empty() ? "nobody" : policy.sandbox_user;
  if (const passwd* pw = ::getpwnam(name.c_str())) {
    uid = pw->pw_uid;
    gid = pw->pw_gid;
  } else {
    uid = static_cast<uid_t>(std::strtoul(name.c_str(), nullptr, 10));
    gid = static_cast<gid_t>(uid);
  }
}

}  // namespace

LayerReport probe_host_layers() {
  LayerReport report;
  report.running_as_root = ::geteuid() == 0;
  NamespaceProbe ns = probe_namespaces();
  report.user_ns = ns.user_errno == 0;
  if (!report.user_ns) {
    report.user_ns_problem = userns_problem(ns.user_errno);
  } else {
    bool* flags[6] = {&report.mount_ns, &report.pid_ns, &report.net_ns,
                      &report.ipc_ns,   &report.uts_ns, &report.cgroup_ns};
    for (int i = 0; i < 6; ++i) {
      *flags[i] = ns.errnos[i] == 0;
      if (!*flags[i] && report.ns_problem.empty())
        report.ns_problem =
            std::string("unshare(") + kProbeNames[i] + "): " + errno_text(ns.errnos[i]);
    }
    report.fresh_proc = report.mount_ns && report.pid_ns && ns.proc_errno == 0;
    if (report.mount_ns && report.pid_ns && !report.fresh_proc && report.ns_problem.empty())
      report.ns_problem =
          "mount(proc) in a new pid namespace: " + errno_text(ns.proc_errno) +
          "; a container that masks parts of /proc allows no fresh one (Kubernetes: "
          "procMount: Unmasked with hostUsers: false; podman: --security-opt "
          "unmask=/proc/*)";
  }
  report.seccomp = seccomp_available();
  report.landlock_abi = landlock_abi();
  report.cgroups = find_cgroup_parents();
  return report;
}

const LayerReport& host_layers() {
  static const LayerReport report = probe_host_layers();
  return report;
}

std::vector<LayerReport::Line> LayerReport::lines() const {
  std::vector<Line> out;
  auto ns_line = [&](const char* name, bool ok) {
    out.push_back({name, ok, ok ? "yes" : (user_ns ? ns_problem : user_ns_problem)});
  };
  ns_line("user namespace", user_ns);
  ns_line("mount namespace", mount_ns);
  ns_line("pid namespace", pid_ns);
  ns_line("network namespace", net_ns);
  ns_line("ipc namespace", ipc_ns);
  ns_line("uts namespace", uts_ns);
  ns_line("cgroup namespace", cgroup_ns);
  if (user_ns && mount_ns && pid_ns) ns_line("a fresh /proc", fresh_proc);
  out.push_back(
      {"seccomp", seccomp,
       seccomp ? "filters with errno actions and user notification"
               : "unavailable (no CONFIG_SECCOMP_FILTER, or no user notification before Linux "
                 "5.0)"});
  out.push_back({"Landlock", landlock_abi > 0,
                 landlock_abi > 0 ? "ABI " + std::to_string(landlock_abi)
                                  : "unavailable (not built in or not in lsm=)"});
  std::string cg;
  if (!cgroups.v2.empty())
    cg = "cgroup v2 at " + cgroups.v2 + " (memory, pids), writable";
  else {
    if (!cgroups.v1_memory.empty()) cg += "v1 memory at " + cgroups.v1_memory + ", writable";
    if (!cgroups.v1_pids.empty())
      cg += std::string(cg.empty() ? "" : "; ") + "v1 pids at " + cgroups.v1_pids + ", writable";
    if (!cgroups.v1_cpuacct.empty())
      cg += std::string(cg.empty() ? "" : "; ") + "v1 cpuacct at " + cgroups.v1_cpuacct +
            ", writable";
  }
  for (const auto& note : cgroups.notes) cg += std::string(cg.empty() ? "" : "; ") + note;
  out.push_back({"cgroups", cgroups.memory() && cgroups.pids(), cg.empty() ? "none mounted" : cg});
  out.push_back({"running as", true,
                 running_as_root ? "root (the code runs as the --sandbox-user, never uid 0)"
                                 : "uid " + std::to_string(::getuid()) +
                                       " (unprivileged: no cgroups unless delegated)"});
  return out;
}

namespace {

const char* const kDegradedFix = "or pass --isolation degraded";

// A layer the host lacks: missing, and in strict mode the first one is the refusal, with its fix.
void refuse_layer(EnforcementPlan& plan, bool strict, const std::string& what,
                  const std::string& fix) {
  plan.missing.push_back(what);
  if (strict && plan.refusal.empty()) plan.refusal = what + ": " + fix;
}

// With every namespace: the filesystem, network and identity they give.
void plan_namespaced(EnforcementPlan& plan, const Policy& policy, const LayerReport& host,
                     bool strict) {
  plan.uses.push_back("namespaces: user, mount, pid, network, ipc, uts, cgroup");
  plan.uses.push_back(
      "filesystem: empty tmpfs root, read-only system and interpreter, the workspace " +
      (policy.workspace.empty() ? std::string("(the working directory)")
                                : policy.workspace.string()) +
      " writable, secrets masked, private /tmp, /dev/shm and home, pivot_root");
  plan.uses.push_back(policy.allow_net.empty()
                          ? "network: loopback only"
                          : "network: loopback only; the allowlisted hosts through the kernel's "
                            "egress proxy at 127.0.0.1:3128 inside (HTTP_PROXY)");
  if (host.running_as_root) {
    uid_t uid;
    gid_t gid;
    std::string name;
    sandbox_identity(policy, uid, gid, name);
    plan.uses.push_back("identity: uid 1000 inside, host uid " + std::to_string(uid) + " (" + name +
                        ")");
    std::string problem = idmap_problem(policy, uid, gid);
    if (!problem.empty())
      refuse_layer(plan, strict,
                   "the workspace cannot be idmapped for the sandbox user (" + problem + ")",
                   std::string("run belljar as the workspace's owner, pass --sandbox-user with "
                               "the workspace's owner, ") +
                       kDegradedFix);
    else
      plan.uses.push_back(
          "workspace: idmapped to the sandbox user where its owner differs (host files keep "
          "their owner)");
  } else {
    plan.uses.push_back("identity: uid 1000 inside, mapped to this user (uid " +
                        std::to_string(::getuid()) + ")");
  }
}

// Without namespaces: what Landlock and seccomp stand in for, and what nothing does.
void plan_unnamespaced(EnforcementPlan& plan, const Policy& policy, const LayerReport& host) {
  plan.missing.push_back(
      "no pid namespace: the worker sees the host's processes and their command lines "
      "(/proc/PID/cmdline; their environments and memory stay closed to it)");
  plan.missing.push_back(
      "no mount namespace: secrets in the workspace cannot be masked, so a workspace holding "
      "one (.env, .ssh, jupyter/runtime, --hide ...) is refused at start; one saved there "
      "while the session runs is readable until the next start refuses it");
  if (host.landlock_abi > 0)
    plan.uses.push_back(
        "Landlock ABI " + std::to_string(host.landlock_abi) +
        ": reads limited to the system, the interpreter and --ro paths; writes to the workspace "
        "and a private directory (HOME and TMPDIR, /tmp/belljar-session-*), never the host's "
        "/tmp; no /dev/shm (POSIX shared memory and multiprocessing's locks fail)");
  else
    plan.missing.push_back("Landlock is unavailable: no filesystem restriction at all");
  plan.uses.push_back("network: seccomp refuses AF_INET/AF_INET6 sockets (no network namespace)");
  if (!policy.allow_net.empty())
    plan.missing.push_back(
        "egress: --allow-net needs the network namespace (the proxy's port lives in it); "
        "without one the sandbox has no network at all");
  plan.missing.push_back("no pid namespace: processes that detach may outlive the session");
}

// The session's limits: memory, processes, files.
void plan_limits(EnforcementPlan& plan, const LayerReport& host) {
  if (!host.cgroups.v2.empty())
    plan.uses.push_back("limits: cgroup v2 memory.max and pids.max for the session");
  else if (host.cgroups.memory() || host.cgroups.pids())
    plan.uses.push_back(std::string("limits: cgroup v1 ") +
                        (host.cgroups.memory() ? "memory " : "") +
                        (host.cgroups.pids() ? "pids " : "") + "for the session");
  // Where /tmp and /dev/shm are the jail's own tmpfs (namespaces), --tmp-size bounds them.
  const std::string tmpfs =
      plan.namespaces ? "; POSIX shared memory and /tmp are the --tmp-size tmpfs" : "";
  if (host.cgroups.memory())
    plan.uses.push_back(
        "memory: the cgroup caps the session's total at --memory (its OOM killer ends the "
        "largest process)" +
        tmpfs);
  else
    plan.uses.push_back(
        "memory: no writable memory cgroup here: RLIMIT_AS/RLIMIT_DATA cap each process, and "
        "the warden samples the session's total (anonymous and shared memory, PSS, over every "
        "process; every 20 ms while anything runs, 200 ms idle) and stops the sandbox past "
        "--memory; memfds and SysV shared memory are refused" +
        tmpfs);
  if (!host.cgroups.pids())
    plan.uses.push_back(plan.namespaces
                            ? "processes: RLIMIT_NPROC, counted in the sandbox's user namespace"
                            : "processes: RLIMIT_NPROC of the worker's uid");
  if (plan.namespaces)
    plan.uses.push_back(
        "files: RLIMIT_FSIZE, RLIMIT_NOFILE; /tmp, /dev/shm and home share one --tmp-size tmpfs");
  else {
    plan.uses.push_back("files: RLIMIT_FSIZE, RLIMIT_NOFILE");
    plan.missing.push_back(
        "--tmp-size: the private directory lies on the host's /tmp, so only --file-size bounds "
        "what is written there");
  }
}

}  // namespace

EnforcementPlan plan_enforcement(const Policy& policy, const LayerReport& host) {
  EnforcementPlan plan;
  plan.isolation = policy.isolation;
  if (policy.isolation == Isolation::none) {
    plan.enforceable = true;
    plan.uses.push_back(
        "none: the worker is a plain child process with the kernel's environment, files, "
        "network and privileges (developer mode)");
    plan.missing.push_back("every layer (isolation none)");
    return plan;
  }
  const bool strict = policy.isolation == Isolation::strict;
  const std::string degraded_fix = kDegradedFix;

  plan.namespaces = host.all_namespaces();
  if (!host.user_ns)
    refuse_layer(plan, strict, host.user_ns_problem, "enable them " + degraded_fix);
  else if (!plan.namespaces)
    refuse_layer(plan, strict, "namespaces are incomplete (" + host.ns_problem + ")",
                 "allow them " + degraded_fix);
  if (!host.seccomp)
    refuse_layer(plan, strict,
                 "seccomp is unavailable (kernel without CONFIG_SECCOMP_FILTER, or without user "
                 "notification, which the workspace broker needs: Linux 5.0+)",
                 "use a kernel with it " + degraded_fix);

  if (plan.namespaces)
    plan_namespaced(plan, policy, host, strict);
  else
    plan_unnamespaced(plan, policy, host);
  if (host.seccomp)
    plan.uses.push_back(
        "seccomp: refuses namespace, mount, ptrace, bpf, keyring, io_uring, module, clock, "
        "modify_ldt and reboot calls, x32/i386 syscalls, socket families beyond "
        "unix/inet/netlink and netlink protocols beyond NETLINK_ROUTE; memfd_create and SysV "
        "IPC (shmget, msgget, semget) get ENOSYS: memory no process maps, which the memory "
        "cap could not count");
  if (host.seccomp)
    plan.uses.push_back(
        "workspace broker: every create, rename, remove, symlink and mode change, and every "
        "open for writing, is stopped by seccomp and decided outside the sandbox before it is "
        "made (no dot-path, nothing in a Python environment, nothing --protect names; no hard "
        "links)");
  plan.uses.push_back("privileges: no capabilities, no_new_privs, new session, core dumps off");

  plan_limits(plan, host);

  plan.enforceable = !strict || plan.refusal.empty();
  return plan;
}

std::string EnforcementPlan::text() const {
  std::string out = std::string("policy (isolation ") + isolation_name(isolation) +
                    "): " + (enforceable ? "enforceable" : "NOT enforceable") + "\n";
  if (!refusal.empty()) out += "  refused: " + refusal + "\n";
  for (const auto& line : uses) out += "  uses     " + line + "\n";
  for (const auto& line : missing) out += "  missing  " + line + "\n";
  return out;
}

std::string describe_check(const LayerReport& host, const EnforcementPlan& plan) {
  std::string out = "host layers:\n";
  for (const auto& line : host.lines()) {
    std::string name = line.layer;
    name.resize(20, ' ');
    out += "  " + name + (line.available ? "ok    " : "NO    ") + line.detail + "\n";
  }
  return out + plan.text();
}

}  // namespace belljar
