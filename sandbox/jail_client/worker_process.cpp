#include "sandbox/jail_client/worker_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <utility>

#include "sandbox/jail_client/host_check.hpp"
#include "sandbox/jail_client/jail_helper.hpp"
#include "sandbox/jail_client/jail_plan.hpp"
#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/setup_error.hpp"
#include "sandbox/os/small_file.hpp"

extern char** environ;

namespace belljar {
namespace fs = std::filesystem;

namespace {

constexpr auto kSetupTimeout = std::chrono::seconds(30);

// Child-side descriptors live at 10 and above, so the dup2() calls that put them at 0-6 in
// the child can never clobber one another.
Fd lifted(int fd, const char* what) {
  if (fd < 0) throw SandboxError(std::string(what) + ": " + errno_text(errno));
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  int err = errno;
  ::close(fd);
  if (high < 0)
    throw SandboxError(std::string("fcntl(F_DUPFD_CLOEXEC) for ") + what + ": " + errno_text(err));
  return Fd(high);
}

struct Channels {
  Fd frames, frames_child, out, out_child, err, err_child, null_fd;
  // The debug channel (fd 4 in the worker): the debugger's requests and answers, on a socket of
  // their own so they flow while the worker's main thread runs a cell or is paused in it.
  Fd debug, debug_child;
};

Channels make_channels() {
  Channels c;
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
    throw SandboxError("socketpair(frames): " + errno_text(errno));
  c.frames = lifted(sp[0], "frames socket");
  c.frames_child = lifted(sp[1], "frames socket");
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
    throw SandboxError("socketpair(debug channel): " + errno_text(errno));
  c.debug = lifted(sp[0], "debug channel");
  c.debug_child = lifted(sp[1], "debug channel");
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw SandboxError("pipe2(stdout): " + errno_text(errno));
  c.out = lifted(p[0], "stdout pipe");
  c.out_child = lifted(p[1], "stdout pipe");
  if (::pipe2(p, O_CLOEXEC) != 0) throw SandboxError("pipe2(stderr): " + errno_text(errno));
  c.err = lifted(p[0], "stderr pipe");
  c.err_child = lifted(p[1], "stderr pipe");
  c.null_fd = lifted(::open("/dev/null", O_RDWR | O_CLOEXEC), "open(/dev/null)");
  return c;
}

std::vector<char*> c_strings(const std::vector<std::string>& items) {
  std::vector<char*> out;
  for (const auto& item : items) out.push_back(const_cast<char*>(item.c_str()));
  out.push_back(nullptr);
  return out;
}

std::string drain(int fd, size_t limit) {
  std::string text;
  char buf[1024];
  while (text.size() < limit) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text.substr(0, limit);
}

void reap(pid_t pid) {
  int status;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

struct ProcStat {
  pid_t ppid = 0;
  double cpu = 0;      // utime + stime + cutime + cstime, seconds
  double own_cpu = 0;  // utime + stime: a thread's own, read from its task's stat
  bool ok = false;
};

// A /proc/PID/stat or /proc/PID/task/TID/stat (the same fields).
ProcStat read_stat_file(const std::string& path) {
  ProcStat st;
  std::string text = read_small_file(path, 4096);
  // After the command name (which may hold spaces and parentheses): state, ppid, ... utime is
  // the 12th field from there, stime, cutime and cstime follow.
  auto close = text.rfind(')');
  if (close == std::string::npos) return st;
  auto f = words(std::string_view(text).substr(close + 1));
  if (f.size() < 15) return st;
  static const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  auto ppid = parse_unsigned(f[1]);
  if (!ppid) return st;
  st.ppid = static_cast<pid_t>(*ppid);
  auto field = [&f](size_t i) { return parse_unsigned(f[i]).value_or(0); };
  uint64_t own = field(11) + field(12), children = field(13) + field(14);
  st.own_cpu = static_cast<double>(own) / ticks;
  st.cpu = static_cast<double>(own + children) / ticks;
  st.ok = true;
  return st;
}

ProcStat read_stat(pid_t pid) {
  return read_stat_file("/proc/" + std::to_string(pid) + "/stat");
}

// CPU of a process and every live descendant (reaped ones are in their parents' c*time), or,
// without `own`, of its descendants only (the root's children's, reaped or live). A child the
// kernel reaps by itself reaches no one's c*time: the worker's filter refuses the SIGCHLD
// actions that ask for that when this count is the session's (SeccompOptions).
// At any depth: a chain of forks 70 deep ran 35 s under --cpu 3 below the depth limit this walk
// had (the outside attack on round three). Walked with a list, not recursion; a tree is
// bounded by --pids, and kMaxProcesses, more than any cap, ends a walk that would not.
double tree_cpu(pid_t root, bool own = true) {
  constexpr size_t kMaxProcesses = 1u << 16;
  double total = 0;
  std::vector<pid_t> pending{root};
  for (size_t seen = 0; !pending.empty() && seen < kMaxProcesses; ++seen) {
    pid_t pid = pending.back();
    pending.pop_back();
    ProcStat st = read_stat(pid);
    if (!st.ok) continue;
    total += pid == root && !own ? st.cpu - st.own_cpu : st.cpu;
    fs::path tasks = "/proc/" + std::to_string(pid) + "/task";
    std::error_code ec;
    for (fs::directory_iterator it(tasks, ec), end; !ec && it != end; it.increment(ec)) {
      std::string children = read_small_file(it->path() / "children", 1u << 20);
      for (auto word : words(children))
        if (auto child = parse_unsigned(word); child && *child > 0 && *child < 0x3fffffff)
          pending.push_back(static_cast<pid_t>(*child));
    }
  }
  return total;
}

uint64_t vm_hwm(pid_t pid) {
  std::string status = read_small_file("/proc/" + std::to_string(pid) + "/status");
  for (auto line : lines(status))
    if (line.substr(0, 6) == "VmHWM:") {
      auto fields = words(line);
      return fields.size() > 1 ? parse_unsigned(fields[1]).value_or(0) * 1024 : 0;
    }
  return 0;
}

// isolation none: the worker as a plain child in the workspace, with the kernel's environment;
// its pid once the exec has succeeded (an exec that fails is reaped and said).
pid_t exec_unsandboxed(const Policy& policy, const WorkerLaunch& launch, const Channels& ch) {
  const std::string python = launch.python.empty() ? policy.python : launch.python;
  std::error_code ec;
  fs::path package = fs::canonical(launch.worker_package_dir, ec);
  if (ec)
    throw SandboxError("worker package " + launch.worker_package_dir.string() + ": " +
                       ec.message());
  std::vector<std::string> args = worker_argv(python, package.string());
  std::vector<char*> argv = c_strings(args);
  std::string workspace =
      policy.workspace.empty() ? fs::current_path().string() : policy.workspace.string();
  int ep[2];
  if (::pipe2(ep, O_CLOEXEC) != 0) throw SandboxError("pipe2: " + errno_text(errno));
  Fd exec_r = lifted(ep[0], "exec pipe"), exec_w = lifted(ep[1], "exec pipe");

  // Between fork and exec only async-signal-safe calls: the supervisor has threads.
  pid_t pid = ::fork();
  if (pid < 0) throw SandboxError("fork: " + errno_text(errno));
  if (pid == 0) {
    // The supervisor's thread may block or ignore signals (a reactor on signalfd does);
    // Python would inherit that and never see SIGINT as KeyboardInterrupt.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::setpgid(0, 0);
    ::dup2(ch.null_fd.get(), 0);
    ::dup2(ch.out_child.get(), 1);
    ::dup2(ch.err_child.get(), 2);
    ::dup2(ch.frames_child.get(), 3);
    ::dup2(ch.debug_child.get(), 4);
    ::close_range(5, ~0U, CLOSE_RANGE_CLOEXEC);
    int err = 0;
    if (::chdir(workspace.c_str()) == 0) ::execve(python.c_str(), argv.data(), environ);
    err = errno;
    ssize_t ignored = ::write(exec_w.get(), &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  exec_w.reset();
  int err = 0;
  ssize_t n;
  while ((n = ::read(exec_r.get(), &err, sizeof err)) < 0 && errno == EINTR) {
  }
  if (n == sizeof err) {
    reap(pid);
    throw SandboxError("execve(" + python + ") in " + workspace + ": " + errno_text(err));
  }
  return pid;
}

// The warden: the jail helper exec'd from its descriptor with the documented fds (0-3 the
// worker's, the control socket, the egress channel or nothing, the debug channel) and nothing
// else, in an empty environment. Its pid; it reports on the control socket from then on.
pid_t exec_warden(int helper, const Channels& ch, int control_child, int egress_child) {
  std::vector<std::string> args = {"belljar-jail"};
  std::vector<char*> argv = c_strings(args);
  char* empty_env[] = {nullptr};
  const pid_t supervisor = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw SandboxError("fork: " + errno_text(errno));
  if (pid == 0) {
    // The warden dies with the thread that forked it (PR_SET_PDEATHSIG survives the exec).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != supervisor) _exit(1);
    ::dup2(ch.null_fd.get(), 0);
    ::dup2(ch.out_child.get(), 1);
    ::dup2(ch.err_child.get(), 2);
    ::dup2(ch.frames_child.get(), 3);
    ::dup2(control_child, kControlFd);
    if (egress_child >= 0)
      ::dup2(egress_child, kEgressChannelFd);
    else  // the egress slot stays empty: whatever sits there closes at the exec
      ::close_range(kEgressChannelFd, kEgressChannelFd, CLOSE_RANGE_CLOEXEC);
    ::dup2(ch.debug_child.get(), kDebugChannelFd);
    // Everything else closes at the exec; the helper's own descriptor must live until then.
    ::close_range(kDebugChannelFd + 1, ~0U, CLOSE_RANGE_CLOEXEC);
    // A fresh single-threaded process, with an empty environment.
    ::execveat(helper, "", argv.data(), empty_env, AT_EMPTY_PATH);
    _exit(127);
  }
  return pid;
}

}  // namespace

std::string WorkerExit::describe() const {
  std::string text;
  if (signal > 0) {
    const char* abbrev = ::sigabbrev_np(signal);
    text = "signal " + std::to_string(signal) +
           (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
  } else {
    text = "exit status " + std::to_string(exit_code);
  }
  if (memory_limit) text = "the memory limit was reached (" + text + ")";
  return text;
}

WorkerProcess::WorkerProcess(WorkerProcess&& other) noexcept {
  *this = std::move(other);
}

WorkerProcess& WorkerProcess::operator=(WorkerProcess&& other) noexcept {
  if (this == &other) return *this;
  end();
  pid_ = std::exchange(other.pid_, -1);
  worker_pid_ = std::exchange(other.worker_pid_, -1);
  frames_ = std::move(other.frames_);
  debug_ = std::move(other.debug_);
  stdout_ = std::move(other.stdout_);
  stderr_ = std::move(other.stderr_);
  status_ = std::move(other.status_);
  status_reader_ = std::move(other.status_reader_);
  egress_channel_ = std::move(other.egress_channel_);
  cgroup_ = std::move(other.cgroup_);
  cgroup_released_ = std::exchange(other.cgroup_released_, true);
  notes_ = std::move(other.notes_);
  exit_report_ = std::move(other.exit_report_);
  surveys_ = std::move(other.surveys_);
  guards_workspace_ = std::exchange(other.guards_workspace_, false);
  landlocked_ = std::exchange(other.landlocked_, false);
  morgue_workspace_ = std::exchange(other.morgue_workspace_, {});
  exit_ = std::move(other.exit_);
  last_cpu_ = other.last_cpu_;
  warden_cpu_ = other.warden_cpu_;
  supervisor_cpu_ = other.supervisor_cpu_;
  last_peak_ = other.last_peak_;
  init_pid_ = std::exchange(other.init_pid_, -1);
  return *this;
}

WorkerProcess::~WorkerProcess() {
  end();
}

void WorkerProcess::end() {
  if (pid_ > 0 && landlocked_ && !exit_) {
    // The warden ends the session on SIGTERM and removes its private directory; a warden that
    // has not gone within a second is killed (and its directory stays behind).
    kill();
    for (int waited = 0; waited < 100; ++waited) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_ || (r < 0 && errno == ECHILD)) {
        pid_ = -1;
        break;
      }
      ::usleep(10'000);
    }
  }
  if (pid_ > 0) {
    landlocked_ = false;  // past asking: SIGKILL
    kill();
    reap(pid_);
    pid_ = -1;
  }
  if (!cgroup_released_) {
    cgroup_.kill_all();
    cgroup_.remove_after_kill();
    cgroup_released_ = true;
  }
  // The warden, killed, could not: the broker's morgue (files removed while still open) holds
  // nothing of a session that is over, and goes with it; the next start empties it too.
  // Its warden killed, its folder of the morgue is unlocked: it goes with every other such.
  if (!morgue_workspace_.empty()) sweep_dead_morgues(std::exchange(morgue_workspace_, {}));
}

WorkerProcess WorkerProcess::start(const Policy& policy, const WorkerLaunch& launch) {
  if (policy.isolation == Isolation::none) return start(policy, launch, LayerReport{});
  return start(policy, launch, host_layers());
}

WorkerProcess WorkerProcess::start(const Policy& policy, const WorkerLaunch& launch,
                                   const LayerReport& host) {
  WorkerProcess wp;
  Channels ch = make_channels();

  if (policy.isolation == Isolation::none) {
    wp.pid_ = wp.worker_pid_ = exec_unsandboxed(policy, launch, ch);
    wp.frames_ = std::move(ch.frames);
    wp.debug_ = std::move(ch.debug);
    wp.stdout_ = std::move(ch.out);
    wp.stderr_ = std::move(ch.err);
    wp.notes_.push_back(
        "isolation none: the worker runs unsandboxed, with the kernel's environment and "
        "privileges");
    return wp;
  }

  EnforcementPlan plan = plan_enforcement(policy, host);
  if (!plan.enforceable) throw SandboxError(plan.refusal);
  JailSpec spec = make_jail_spec(
      policy, launch, plan.namespaces ? JailSpec::Mode::namespaces : JailSpec::Mode::landlock,
      environ);
  if (policy.isolation == Isolation::degraded) wp.notes_ = plan.missing;
  if (!launch.jail_helper) throw SandboxError("no jail helper (belljar-jail) to build the sandbox");
  const std::string spec_record = spec.encode();  // the first frame; requests follow

  // One connection per message, each carrying its socket (SCM_RIGHTS): SOCK_SEQPACKET keeps the
  // boundaries, so a descriptor can never arrive with another connection's message.
  Fd egress_child;
  if (spec.egress_port != 0) {
    int ep[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ep) != 0)
      throw SandboxError("socketpair(egress channel): " + errno_text(errno));
    wp.egress_channel_ = lifted(ep[0], "egress channel");
    egress_child = lifted(ep[1], "egress channel");
  }

  int cp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cp) != 0)
    throw SandboxError("socketpair(control): " + errno_text(errno));
  Fd control = lifted(cp[0], "control socket"), control_child = lifted(cp[1], "control socket");

  wp.pid_ = exec_warden(launch.jail_helper->fd(), ch, control_child.get(), egress_child.get());
  control_child.reset();
  egress_child.reset();
  ch.frames_child.reset();
  ch.debug_child.reset();
  ch.out_child.reset();
  ch.err_child.reset();
  wp.frames_ = std::move(ch.frames);
  wp.debug_ = std::move(ch.debug);
  wp.stdout_ = std::move(ch.out);
  wp.stderr_ = std::move(ch.err);

  // A warden that is already gone says why below (or its exit does).
  (void)send_frame(control.get(), spec_record);
  wp.await_ready(std::move(control), plan.namespaces,
                 plan.namespaces && spec.broker ? spec.workspace : std::string());
  return wp;
}

void WorkerProcess::await_ready(Fd control, bool namespaces, std::string morgue_workspace) {
  auto fail = [&](const std::string& message) -> SandboxError {
    ::kill(pid_, SIGKILL);
    reap(pid_);
    pid_ = -1;
    return SandboxError(message);
  };
  const auto deadline = std::chrono::steady_clock::now() + kSetupTimeout;
  FrameReader reader(control.get());
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw fail("the sandbox was not ready within 30 s");
    pollfd p{control.get(), POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    bool closed = reader.fill();
    while (auto frame = reader.next()) {
      JailReport report;
      try {
        report = decode_report(*frame);
      } catch (const RecordError& e) {
        throw fail("the jail helper sent a garbled report during setup (" + e.message + ")");
      }
      if (auto* error = std::get_if<ErrorReport>(&report)) throw fail(error->message);
      if (auto* ready = std::get_if<ReadyReport>(&report)) {
        worker_pid_ = ready->worker_pid;
        cgroup_ = SandboxCgroup(ready->cgroup);
        cgroup_released_ = cgroup_.empty();
        notes_.insert(notes_.end(), ready->notes.begin(), ready->notes.end());
        if (namespaces && worker_pid_ > 0) init_pid_ = read_stat(worker_pid_).ppid;
        ::fcntl(control.get(), F_SETFL, O_NONBLOCK);
        status_ = std::move(control);
        status_reader_ = std::move(reader);  // holds whatever followed the ready report
        // Both modes survey: strict's surveys mount guards and measure the quota, degraded
        // mode's find the names protected links lead through, for its broker to hold.
        guards_workspace_ = true;
        morgue_workspace_ = std::move(morgue_workspace);
        landlocked_ = !namespaces;
        return;
      }
    }
    if (reader.broken()) throw fail("the jail helper sent a report over the cap during setup");
    if (closed) {
      std::string said = drain(stderr_.get(), 2000);
      while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
      throw fail("the sandbox exited during setup" + (said.empty() ? std::string() : ": " + said));
    }
  }
}

void WorkerProcess::interrupt() {
  if (pid_ <= 0 || exit_) return;
  if (!status_) {
    if (::kill(-pid_, SIGINT) != 0) ::kill(pid_, SIGINT);  // isolation none: its process group
  } else {
    ::kill(pid_, SIGINT);  // the warden passes it to init, init to the worker's process group
  }
}

void WorkerProcess::kill() {
  if (pid_ <= 0) return;
  if (landlocked_ && !exit_) {
    // The warden kills the session at once on SIGTERM, then removes its private directory on
    // the host's /tmp; end() kills it outright if it has not gone within a second.
    ::kill(pid_, SIGTERM);
    return;
  }
  if (!status_) ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);  // the warden: init dies with it (PDEATHSIG), and the namespace with init
  if (!cgroup_released_) cgroup_.kill_all();
}

void WorkerProcess::read_status() {
  if (!status_ || !status_reader_) return;
  status_reader_->fill();
  while (auto frame = status_reader_->next()) {
    JailReport report;
    try {
      report = decode_report(*frame);
    } catch (const RecordError& e) {
      // The warden is ours and outside the jail: a report it garbled is a broken jail.
      SurveyReport failed;
      failed.error = "a garbled report: " + e.message;
      if (surveys_.size() < 16) surveys_.push_back(std::move(failed));
      kill();
      continue;
    }
    if (auto* exit = std::get_if<ExitReport>(&report))
      exit_report_ = *exit;
    else if (auto* survey = std::get_if<SurveyReport>(&report); survey && surveys_.size() < 16)
      surveys_.push_back(std::move(*survey));
    else if (auto* refusal = std::get_if<RefusalReport>(&report);
             refusal && refusals_.size() < 4096)
      refusals_.push_back(std::move(*refusal));
  }
  if (status_reader_->broken()) kill();
}

void WorkerProcess::request_survey(std::optional<uint64_t> baseline, bool measure) {
  if (!status_ || !guards_workspace_ || exit_) return;
  std::string frame = frame_of(SurveyRequest{baseline, measure}.encode());
  // Never blocks the reactor. A request that does not fit whole would desynchronise the
  // channel: the warden stopped reading, so the sandbox is stopped (its exit tells the cell).
  ssize_t n = ::send(status_.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0 && static_cast<size_t>(n) != frame.size()) kill();
}

std::optional<SurveyReport> WorkerProcess::take_survey() {
  read_status();
  if (surveys_.empty()) return std::nullopt;
  SurveyReport first = std::move(surveys_.front());
  surveys_.pop_front();
  return first;
}

std::vector<RefusalReport> WorkerProcess::take_refusals() {
  read_status();
  return std::exchange(refusals_, {});
}

std::optional<WorkerExit> WorkerProcess::poll_exit() {
  if (exit_) return exit_;
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0 || (r < 0 && errno == EINTR)) return std::nullopt;
  // Measure before the cgroup goes away.
  cpu_seconds();
  peak_memory_bytes();
  pid_ = -1;
  read_status();
  WorkerExit exit;
  if (exit_report_) {
    exit.exit_code = exit_report_->code;
    exit.signal = exit_report_->signal;
    exit.memory_limit = exit_report_->memory_limit;
    exit.memory_total_bytes = exit_report_->memory_total_bytes;
    last_peak_ = std::max(last_peak_, exit.memory_total_bytes);
    if (exit_report_->cpu_ns >= 0)
      last_cpu_ = std::max(last_cpu_, exit_report_->cpu_ns / 1e9 + warden_cpu_ + supervisor_cpu_);
    last_peak_ = std::max(last_peak_, exit_report_->peak_memory_bytes);
  } else if (r > 0 && WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  } else if (r > 0) {
    exit.exit_code = WEXITSTATUS(status);
  }
  if (!exit_report_ && !cgroup_released_) exit.memory_limit = cgroup_.oom_kills() > 0;
  if (!cgroup_released_) {
    // The warden removes it on a normal end; after a SIGKILL it is ours to clean (one try
    // here, the destructor retries).
    cgroup_.kill_all();
    if (cgroup_.remove()) cgroup_released_ = true;
  }
  exit_ = exit;
  return exit_;
}

double WorkerProcess::warden_cpu() const {
  if (pid_ > 0 && !exit_) {
    ProcStat st = read_stat(pid_);
    if (st.ok) warden_cpu_ = std::max(warden_cpu_, st.own_cpu);
  }
  return warden_cpu_;
}

double WorkerProcess::cpu_seconds() const {
  // The warden works for this session alone, outside the sandbox's cgroup and process tree: its
  // broker thread (a thread asking it to walk long paths between cells kept it at 22-26 s of CPU
  // per 30 s) and its main thread (memory samples without a cgroup read every process's
  // smaps_rollup: forks sharing pages cost it 7 s per 10 s, the outside attack on round three;
  // surveys) are charged, all of its own CPU. So is the supervisor's work draining the worker.
  double broker = warden_cpu() + supervisor_cpu_;
  if (!cgroup_released_) {
    double cpu = cgroup_.cpu_seconds();
    if (cpu >= 0) return last_cpu_ = std::max(last_cpu_, cpu + broker);
  }
  if (!exit_ && pid_ > 0) {
    double tree = -1;
    if (init_pid_ > 0)
      tree = tree_cpu(init_pid_);  // init reaps the orphans, in the tree's own count
    else if (worker_pid_ > 0 && worker_pid_ != pid_)
      // Degraded mode: the warden is the worker's subreaper, so an orphan of the worker's tree
      // (a double fork) runs as the warden's child and is reaped into the warden's cutime. A
      // cell's double-forked children spent 9 s under --cpu 3 counted from the worker alone.
      tree = tree_cpu(pid_, false);
    else if (worker_pid_ > 0)
      tree = tree_cpu(worker_pid_);
    if (tree >= 0) last_cpu_ = std::max(last_cpu_, tree + broker);
  }
  return last_cpu_;
}

bool WorkerProcess::set_memory_limit(uint64_t bytes, std::string* why) {
  if (cgroup_released_) {
    // Without a cgroup the cap is RLIMIT_AS, which the worker could raise back to its hard
    // limit: a per-cell cap there would be a promise the supervisor can't keep.
    if (why)
      *why = "this host gives the sandbox no memory cgroup (the session's --memory still applies)";
    return false;
  }
  return cgroup_.set_memory_limit(bytes, why);
}

uint64_t WorkerProcess::peak_memory_bytes() const {
  if (!cgroup_released_) {
    uint64_t peak = cgroup_.peak_memory_bytes();
    if (peak > 0) return last_peak_ = std::max(last_peak_, peak);
  }
  if (!exit_ && pid_ > 0 && worker_pid_ > 0) last_peak_ = std::max(last_peak_, vm_hwm(worker_pid_));
  return last_peak_;
}

}  // namespace belljar
