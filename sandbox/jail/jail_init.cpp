#include "sandbox/jail/jail_init.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "sandbox/jail/egress_forwarder.hpp"
#include "sandbox/jail/jail_memory.hpp"
#include "sandbox/jail/worker_exec.hpp"
#include "sandbox/jail_protocol/jail_reports.hpp"
#include "sandbox/layers/loopback.hpp"
#include "sandbox/layers/privileges.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

bool has_cap_sys_admin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return data[CAP_SYS_ADMIN / 32].effective & (1u << (CAP_SYS_ADMIN % 32));
}

ExitReport exit_report(int status) {
  ExitReport report;
  if (WIFSIGNALED(status))
    report.signal = WTERMSIG(status);
  else
    report.code = WEXITSTATUS(status);
  return report;
}

// Reaps until the worker is among the dead; returns its status then, -1 otherwise.
int reap_all(pid_t worker) {
  int worker_status = -1, status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0)
    if (pid == worker) worker_status = status;
  return worker_status;
}

pid_t start_worker(const JailSpec& spec, unsigned char go_flags, int report, int broker) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw_errno("pipe2");
  Fd error_r(pipe_fds[0]), error_w(pipe_fds[1]);
  CgroupCaps cgroup{(go_flags & kGoMemoryCgroup) != 0, (go_flags & kGoPidsCgroup) != 0,
                    (go_flags & kGoCpuCgroup) != 0};
  WorkerExecOptions options = worker_exec_options(spec, cgroup, broker, "");
  pid_t worker = ::fork();
  if (worker < 0) throw_errno("fork(worker)");
  if (worker == 0) {
    ::close(report);
    error_r.reset();
    exec_worker(spec, options, error_w.get());
  }
  error_w.reset();
  std::string failure = read_to_eof(error_r.get());
  if (!failure.empty()) {
    ::kill(worker, SIGKILL);
    int status;
    ::waitpid(worker, &status, 0);
    throw SetupError(failure);
  }
  return worker;
}

// Reaps, obeys the warden's signals and, with an egress port, passes connections on. Never
// blocks on anything but poll().
[[noreturn]] void serve(pid_t worker, int report, EgressForwarder* egress) {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&signals, sig);
  int sfd = ::signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    send_report(report, ErrorReport{"jail init: signalfd: " + errno_text(errno)});
    ::kill(-1, SIGKILL);
    _exit(1);
  }
  for (;;) {
    int status = reap_all(worker);
    if (status != -1) {
      send_report(report, exit_report(status));
      _exit(0);  // the kernel now kills whatever is left in the namespace
    }
    std::vector<pollfd> fds = {{sfd, POLLIN, 0}};
    if (egress) egress->poll_set(fds);
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
    if (egress) egress->on_ready(fds.data() + 1);
    if (!(fds[0].revents & POLLIN)) continue;
    signalfd_siginfo info{};
    ssize_t n = ::read(sfd, &info, sizeof info);
    if (n != sizeof info) continue;
    // Only signals from outside the namespace (the warden: sender pid 0 here) are orders; the
    // worker shares our uid and could send us signals too.
    if (info.ssi_signo == SIGCHLD || info.ssi_pid != 0) continue;
    if (info.ssi_signo == SIGINT) {
      // Like jupyter_client: the whole process group, so a cell's subprocesses see it too.
      if (::kill(-worker, SIGINT) != 0) ::kill(worker, SIGINT);
    } else {
      ::kill(-1, SIGKILL);
    }
  }
}

}  // namespace

void run_jail_init(const JailSpec& spec, std::vector<BindTree> trees,
                   const std::vector<GuardedPath>& guards, InitChannels channels) noexcept {
  try {
    ::prctl(PR_SET_NAME, "belljar-init", 0, 0, 0);
    unsigned char go = 0;
    ssize_t n;
    while ((n = ::read(channels.go, &go, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1) _exit(1);  // the warden gave up (or died): nothing to report to
    ::close(channels.go);
    ::umask(0);

    // Our identity inside: uid/gid 1000 (mapped by the warden). As host root we arrive with
    // kuid 0 (unmapped here); switching keeps our capabilities in this namespace, since the
    // old uid is not this namespace's root. Root's supplementary groups (gid 0!) go too.
    if (spec.host_root && ::setgroups(0, nullptr) != 0) throw_errno("setgroups(0)");
    if (::setresgid(kSandboxGid, kSandboxGid, kSandboxGid) != 0) throw_errno("setresgid(1000)");
    if (::setresuid(kSandboxUid, kSandboxUid, kSandboxUid) != 0) throw_errno("setresuid(1000)");
    if (!has_cap_sys_admin())
      throw SetupError("jail init: no CAP_SYS_ADMIN in the new user namespace");
    // Die with the warden. Set only now: a change of uid or gid clears it. If the warden is
    // already gone, its end of the report pipe is closed (POLLERR on ours).
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) throw_errno("prctl(PR_SET_PDEATHSIG)");
    pollfd lifeline{channels.report, POLLOUT, 0};
    if (::poll(&lifeline, 1, 0) < 0 || (lifeline.revents & (POLLERR | POLLHUP))) _exit(1);
    // Not dumpable: the worker (same uid) cannot open our /proc/1/mem or ptrace us.
    if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) throw_errno("prctl(PR_SET_DUMPABLE, 0)");
    // Now that the warden has put us in the sandbox's cgroup, make it our cgroup root.
    if (::unshare(CLONE_NEWCGROUP) != 0) throw_errno("unshare(CLONE_NEWCGROUP)");
    // Cosmetic: the UTS namespace is the sandbox's either way. A container runtime's default
    // seccomp profile refuses sethostname (EPERM); the sandbox then keeps the pod's name.
    if (::sethostname(kSandboxHostname, std::string(kSandboxHostname).size()) != 0 &&
        errno != EPERM)
      throw_errno("sethostname");
    bring_up_loopback();
    // The proxy's port, taken before the worker exists (so the worker cannot bind it first).
    std::optional<EgressForwarder> egress;
    if (spec.egress_port != 0) egress.emplace(spec.egress_port, Fd(kEgressChannelFd));

    if (trees.empty()) {
      // Unprivileged: we copy the sources ourselves, from the host's view we still have.
      std::vector<std::string> notes;
      trees = clone_bind_sources(spec, -1, notes);
    }
    assemble_root(spec, trees, guards);
    trees.clear();

    // Best effort: seccomp refuses the calls anyway (jail_memory.hpp).
    zero_sysv_ipc_limits();
    pid_t worker = start_worker(spec, go, channels.report, channels.broker);
    ::close(channels.broker);  // the listener went out from the worker, before its exec
    ::close(kDebugChannelFd);  // the worker's now (its fd 4)
    // Reaping and signalling its own uid's processes needs no capabilities: keep none.
    drop_capabilities();
    send_report(channels.report, ReadyReport{});
    // Init holds none of the session's pipes: their ends are the worker's alone.
    int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd >= 0)
      for (int fd = 0; fd <= 3; ++fd) ::dup3(null_fd, fd, O_CLOEXEC);
    serve(worker, channels.report, egress ? &*egress : nullptr);
  } catch (const std::exception& e) {
    std::string text = e.what();
    if (text.rfind("worker: ", 0) != 0) text = "jail init: " + text;
    send_report(channels.report, ErrorReport{text});
  } catch (...) {
    send_report(channels.report, ErrorReport{"jail init: unknown failure"});
  }
  _exit(1);
}

}  // namespace belljar
