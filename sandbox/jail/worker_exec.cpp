#include "sandbox/jail/worker_exec.hpp"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "sandbox/layers/privileges.hpp"
#include "sandbox/os/fd_passing.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

WorkerExecOptions worker_exec_options(const JailSpec& spec, CgroupCaps cgroup, int broker_channel,
                                      const std::string& session_dir) {
  WorkerExecOptions options;
  options.limits.file_size = spec.file_size_bytes;
  options.limits.open_files = spec.open_files;
  if (!cgroup.memory) options.limits.memory = spec.memory_bytes;
  if (!cgroup.pids) options.limits.processes = spec.pids;
  options.seccomp.broker = spec.broker;
  options.seccomp.cpu_by_process_tree = !cgroup.cpu;
  options.broker_channel = broker_channel;
  if (spec.mode != JailSpec::Mode::landlock) return options;

  options.switch_user = spec.host_root;
  options.uid = spec.host_uid;
  options.gid = spec.host_gid;
  options.seccomp.refuse_inet = true;
  options.landlock = true;
  for (const auto& bind : spec.binds) {
    if (bind.kind == JailBind::Kind::read_only)
      options.landlock_rules.read_only.push_back(bind.source);
    else
      options.landlock_rules.read_write.push_back(bind.source);  // workspace, devices
  }
  for (const char* path : {"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf",
                           "/etc/hostname", "/proc", "/dev"})
    options.landlock_rules.read_only.push_back(path);
  // Not /tmp nor /dev/shm: both are the host's, shared with every process on it.
  options.landlock_rules.read_write.push_back(session_dir);
  return options;
}

void exec_worker(const JailSpec& spec, const WorkerExecOptions& options, int error_fd) noexcept {
  try {
    sigset_t none;
    sigemptyset(&none);
    if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) throw_errno("sigprocmask");
    for (int sig = 1; sig < NSIG; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
    ::umask(022);

    // A new session: no controlling terminal, and its own process group for interrupts.
    if (::setsid() < 0) throw_errno("setsid");
    if (options.switch_user) {
      drop_bounding_set();  // needs CAP_SETPCAP, which the uid switch takes away
      if (::setgroups(0, nullptr) != 0) throw_errno("setgroups(0)");
      if (::setresgid(options.gid, options.gid, options.gid) != 0)
        throw_errno("setresgid(" + std::to_string(options.gid) + ")");
      if (::setresuid(options.uid, options.uid, options.uid) != 0)
        throw_errno("setresuid(" + std::to_string(options.uid) + ")");
    }
    // Set after the identity change, which clears it; dies with the process that forked it.
    pid_t parent = ::getppid();
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) throw_errno("prctl(PR_SET_PDEATHSIG)");
    if (::getppid() != parent) _exit(127);

    if (::chdir(spec.workspace.c_str()) != 0) throw_errno("chdir(" + spec.workspace + ")");
    apply_rlimits(options.limits);
    // The debug channel becomes fd 4. A descriptor of the jail's own that sits there (the
    // error pipe, the broker's channel: init opened them once fd 4 was free) moves up first.
    int broker_channel = options.broker_channel;
    for (int* fd : {&error_fd, &broker_channel}) {
      if (*fd != kWorkerDebugFd) continue;
      int moved = ::fcntl(*fd, F_DUPFD_CLOEXEC, 10);
      if (moved < 0) throw_errno("fcntl(4, F_DUPFD_CLOEXEC, 10)");
      *fd = moved;
    }
    if (::dup2(kDebugChannelFd, kWorkerDebugFd) < 0)
      throw_errno("dup2(" + std::to_string(kDebugChannelFd) + ", " +
                  std::to_string(kWorkerDebugFd) + ")");
    // Only fds 0-4 cross into Python; the error pipe among the rest closes on exec.
    if (::close_range(kWorkerDebugFd + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
      throw_errno("close_range(5.., CLOSE_RANGE_CLOEXEC)");
    if (options.landlock) restrict_filesystem(options.landlock_rules);
    drop_capabilities();
    forbid_new_privileges();

    std::vector<char*> argv, envp;
    for (const auto& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    for (const auto& entry : spec.env) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);

    // Last: a filter installed any earlier would constrain the setup above as well.
    Fd listener = install_seccomp(options.seccomp);
    if (options.seccomp.broker) {
      // The worker must not keep it: whoever holds the listener answers the brokered calls.
      if (int error = send_fd(broker_channel, listener.get()))
        throw_errno("sending the broker its listener", error);
      listener.reset();
      ::close(broker_channel);
    }
    ::execve(spec.exec_path.c_str(), argv.data(), envp.data());
    throw_errno("execve(" + spec.exec_path + ")");
  } catch (const std::exception& e) {
    std::string text = std::string("worker: ") + e.what();
    ssize_t ignored = ::write(error_fd, text.data(), text.size());
    (void)ignored;
  } catch (...) {
  }
  _exit(127);
}

}  // namespace belljar
