// The warden: the jail helper `belljar-jail` (main.cpp), exec'd by the supervisor's fork so that
// no jail logic runs in the multi-threaded supervisor. A fresh single-threaded process with the
// host's namespaces and credentials, it does what only the outside can: uid/gid maps, cgroups,
// (as root) copies of the bind sources and the workspace's idmapping. Then it clones the jail's
// init into new namespaces, relays its reports to the supervisor, and forwards signals.
#include "sandbox/jail/warden.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "sandbox/jail/jail_init.hpp"
#include "sandbox/jail/jail_memory.hpp"
#include "sandbox/jail/worker_exec.hpp"
#include "sandbox/jail/workspace_broker.hpp"
#include "sandbox/jail/workspace_watch.hpp"
#include "sandbox/jail_protocol/jail_channel.hpp"
#include "sandbox/jail_protocol/jail_reports.hpp"
#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox/layers/cgroup.hpp"
#include "sandbox/layers/mounts.hpp"
#include "sandbox/layers/user_namespace.hpp"
#include "sandbox/os/fd_passing.hpp"
#include "sandbox/os/path_parts.hpp"
#include "sandbox/os/setup_error.hpp"
#include "sandbox/os/small_file.hpp"

namespace belljar {

namespace {

constexpr int kForwarded[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT};

struct Pipe {
  Fd read, write;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2");
    read.reset(fds[0]);
    write.reset(fds[1]);
  }
};

// The worker's filter listener travels on it, from the worker (before its exec) to us.
struct BrokerChannel {
  Fd ours, theirs;
  BrokerChannel() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
      throw_errno("socketpair(broker)");
    ours.reset(fds[0]);
    theirs.reset(fds[1]);
  }
};

// The spec is the first frame on the control socket; requests follow it, a frame each.
JailSpec read_spec(int control) {
  std::string why;
  auto frame = read_frame(control, kMaxSpecBytes, &why);
  if (!frame) throw SetupError("reading the jail's spec: " + why);
  try {
    return JailSpec::decode(*frame);
  } catch (const RecordError& e) {
    throw SetupError("the jail's spec: " + e.message);
  }
}

// The pids listed in /proc/PID/task/TID/children: the children of one thread.
std::vector<pid_t> children_of(pid_t pid) {
  std::string text = read_small_file("/proc/" + std::to_string(pid) + "/task/" +
                                     std::to_string(pid) + "/children");
  std::vector<pid_t> pids;
  for (auto word : words(text))
    if (auto child = parse_unsigned(word); child && *child > 0 && *child < 0x3fffffff)
      pids.push_back(static_cast<pid_t>(*child));
  return pids;
}

// The worker's host pid, as init's only child (init forks nothing else).
pid_t child_of(pid_t pid) {
  auto pids = children_of(pid);
  return pids.empty() ? -1 : pids.front();
}

void null_stdio() {
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) return;
  for (int fd = 0; fd <= 3; ++fd) ::dup2(null_fd, fd);
  ::close(null_fd);
}

class Warden {
 public:
  explicit Warden(int control) : control_(control) {}

  int run() {
    for (int sig = 1; sig < NSIG; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
    sigset_t blocked;
    sigemptyset(&blocked);
    for (int sig : kForwarded) sigaddset(&blocked, sig);
    ::sigprocmask(SIG_BLOCK, &blocked, nullptr);
    signals_.reset(::signalfd(-1, &blocked, SFD_CLOEXEC));
    try {
      // It holds the spec (with --set-env values): nothing else of this uid may read our memory.
      if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) throw_errno("prctl(PR_SET_DUMPABLE, 0)");
      if (!signals_) throw_errno("signalfd");
      spec_ = read_spec(control_.get());
      if (spec_.mode == JailSpec::Mode::namespaces)
        start_namespaced();
      else
        start_landlocked();
    } catch (const std::exception& e) {
      abort_setup(e.what());
      return 1;
    }
    return serve();
  }

 private:
  void abort_setup(const std::string& message) {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      int status;
      while (::waitpid(child_, &status, 0) < 0 && errno == EINTR) {
      }
      child_ = -1;
    }
    cleanup();
    std::string text = message;
    if (text.rfind("jail init: ", 0) != 0 && text.rfind("worker: ", 0) != 0) text = "jail: " + text;
    report(ErrorReport{text});
  }

  void make_cgroup() {
    CgroupParents parents = find_cgroup_parents();
    if (parents.memory() || parents.pids()) {
      try {
        cgroup_ = SandboxCgroup::create(parents, "belljar-" + std::to_string(::getpid()),
                                        spec_.memory_bytes, spec_.pids);
      } catch (const SetupError& e) {
        notes_.push_back(std::string("cgroup: ") + e.what());
      }
    }
    std::string why;
    for (const auto& note : parents.notes) why += (why.empty() ? "" : "; ") + note;
    if (!cgroup_.limits_memory())
      notes_.push_back(
          "memory: no usable cgroup (" + (why.empty() ? std::string("none found") : why) +
          "): RLIMIT_AS/RLIMIT_DATA cap each process at the --memory size instead of the session");
    if (!cgroup_.limits_pids())
      notes_.push_back(
          spec_.mode == JailSpec::Mode::namespaces
              ? "processes: no pids cgroup: RLIMIT_NPROC caps the sandbox user's tasks, counted in "
                "the sandbox's own user namespace"
              : "processes: no pids cgroup: RLIMIT_NPROC caps the tasks of the worker's host uid");
  }

  unsigned char go_flags() const {
    return (cgroup_.limits_memory() ? kGoMemoryCgroup : 0) |
           (cgroup_.limits_pids() ? kGoPidsCgroup : 0) | (cgroup_.counts_cpu() ? kGoCpuCgroup : 0);
  }

  void start_namespaced() {
    watch_.emplace(spec_);
    auto guards = watch_->first_survey();
    std::vector<BindTree> trees;
    if (spec_.host_root) {
      // As host root we copy the sources here: the sandbox's uid could not even reach some of
      // them (an interpreter under /root), and only host root may idmap the workspace.
      struct stat st {};
      if (::stat(spec_.workspace.c_str(), &st) != 0) throw_errno("stat(" + spec_.workspace + ")");
      Fd idmap;
      if (st.st_uid != spec_.host_uid || st.st_gid != spec_.host_gid) {
        try {
          idmap = make_idmap_userns(st.st_uid, spec_.host_uid, st.st_gid, spec_.host_gid);
        } catch (const SetupError& e) {
          if (spec_.strict) throw;
          notes_.push_back(std::string("workspace idmapping: ") + e.what());
        }
      }
      trees = clone_bind_sources(spec_, idmap ? idmap.get() : -1, notes_);
    }
    make_cgroup();

    Pipe go, report;
    BrokerChannel broker;
    // A raw clone() behaves like fork() here: one thread, and the child continues below.
    const unsigned long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                                CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD;
    // The child inherits dumpability; an undumpable child's /proc files belong to root, and an
    // unprivileged warden could not write its uid_map. Init turns it off again itself.
    if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) throw_errno("prctl(PR_SET_DUMPABLE, 1)");
    long pid = ::syscall(SYS_clone, flags, nullptr, nullptr, nullptr, 0);
    if (pid != 0 && ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
      int error = errno;
      if (pid > 0) child_ = static_cast<pid_t>(pid);  // abort_setup kills and reaps it
      throw_errno("prctl(PR_SET_DUMPABLE, 0)", error);
    }
    if (pid < 0)
      throw_errno(
          "clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS)");
    if (pid == 0) {
      control_.reset();
      signals_.reset();
      // The morgue folder's lock is the warden's alone: held by init too, it outlived a killed
      // warden and the supervisor's sweep passed the folder by as a live kernel's.
      if (watch_) watch_->drop_morgue_lock();
      go.write.reset();
      report.read.reset();
      broker.ours.reset();
      run_jail_init(spec_, std::move(trees), guards,
                    {go.read.release(), report.write.release(), broker.theirs.release()});
    }
    child_ = static_cast<pid_t>(pid);
    trees.clear();
    go.read.reset();
    report.write.reset();
    broker.theirs.reset();
    // The egress channel is init's now: with no copy left here, the proxy sees it close when
    // init goes.
    if (spec_.egress_port != 0) ::close(kEgressChannelFd);
    ::close(kDebugChannelFd);  // the same for the debug channel: init hands it to the worker
    from_init_ = std::move(report.read);

    // Init's namespaces, taken while it is still dumpable: once it turns that off (before it
    // says ready) its /proc files belong to root, out of an unprivileged warden's reach.
    watch_->attach(child_);
    write_id_maps(child_, kSandboxUid, spec_.host_uid, kSandboxGid, spec_.host_gid,
                  !spec_.host_root);
    if (!cgroup_.empty()) cgroup_.attach(child_);
    unsigned char flags_byte = go_flags();
    if (::write(go.write.get(), &flags_byte, 1) != 1) throw_errno("write(go)");
    go.write.reset();
    null_stdio();

    // Setup runs until init says ready or error (or dies).
    FrameReader reader(from_init_.get());
    for (;;) {
      pollfd fds[2] = {{from_init_.get(), POLLIN, 0}, {signals_.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        throw_errno("poll");
      }
      if (fds[0].revents) {
        bool closed = reader.fill();
        while (auto frame = reader.next()) {
          JailReport report = decode_from_init(*frame);
          if (auto* error = std::get_if<ErrorReport>(&report)) throw SetupError(error->message);
          if (std::holds_alternative<ReadyReport>(report)) {
            worker_host_pid_ = child_of(child_);
            Fd morgue = spec_.broker ? watch_->hold_morgue() : Fd();
            start_broker(broker.ours.get(), kSandboxUid, kSandboxGid, jail_writable_roots(),
                         std::move(morgue), true);
            ready();
            reader_ = std::move(reader);
            return;
          }
        }
        if (reader.broken()) throw SetupError("the jail's init sent a report over the cap");
        if (closed) throw SetupError("the jail's init exited during setup without a word");
      }
      if (fds[1].revents) {
        signalfd_siginfo info{};
        if (::read(signals_.get(), &info, sizeof info) != sizeof info) continue;
        if (info.ssi_signo != SIGCHLD)
          throw SetupError("stopped by signal " + std::to_string(info.ssi_signo) + " during setup");
      }
    }
  }

  void start_landlocked() {
    // No namespaces, so no tmpfs of its own: a private session directory on the host's /tmp,
    // 0700 and the sandbox user's, holding its home and its temporary files. Landlock lets the
    // worker write there and nowhere else in /tmp, so it neither reads the host's /tmp (where
    // a home, a runtime directory, another user's files may be) nor leaves files in it.
    char session_template[] = "/tmp/belljar-session-XXXXXX";
    if (!::mkdtemp(session_template)) throw_errno("mkdtemp(/tmp/belljar-session-XXXXXX)");
    session_dir_ = session_template;
    for (const char* sub : {"/home", "/tmp"})
      if (::mkdir((session_dir_ + sub).c_str(), 0700) != 0)
        throw_errno("mkdir(" + session_dir_ + sub + ")");
    if (spec_.host_root)
      for (const char* sub : {"", "/home", "/tmp"})
        if (::chown((session_dir_ + sub).c_str(), spec_.host_uid, spec_.host_gid) != 0)
          throw_errno("chown(" + session_dir_ + sub + ")");
    bool tmpdir_set = false;
    for (auto& entry : spec_.env) {
      if (entry.rfind("HOME=", 0) == 0) entry = "HOME=" + session_dir_ + "/home";
      if (entry.rfind("TMPDIR=", 0) == 0)
        entry = "TMPDIR=" + session_dir_ + "/tmp", tmpdir_set = true;
    }
    if (!tmpdir_set) spec_.env.push_back("TMPDIR=" + session_dir_ + "/tmp");
    if (spec_.host_root)
      make_cgroup();
    else
      notes_.push_back(
          "memory and processes: capped per process by RLIMIT_AS/RLIMIT_NPROC (no cgroup)");
    // Orphans of the worker become ours, so we can end them with the session.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
      throw_errno("prctl(PR_SET_CHILD_SUBREAPER, 1)");

    Pipe go, errors;
    BrokerChannel broker;
    WorkerExecOptions options = worker_exec_options(
        spec_, CgroupCaps{cgroup_.limits_memory(), cgroup_.limits_pids(), cgroup_.counts_cpu()},
        broker.theirs.get(), session_dir_);
    // The broker may make names where the worker may write, and nowhere else: Landlock's
    // limits bind the worker, not the warden's thread that acts for it.
    std::vector<std::string> writable_roots = options.landlock_rules.read_write;
    pid_t pid = ::fork();
    if (pid < 0) throw_errno("fork(worker)");
    if (pid == 0) {
      control_.reset();
      signals_.reset();
      go.write.reset();
      errors.read.reset();
      broker.ours.reset();
      unsigned char byte;
      if (::read(go.read.get(), &byte, 1) != 1) _exit(1);
      exec_worker(spec_, options, errors.write.get());
    }
    child_ = pid;
    go.read.reset();
    errors.write.reset();
    broker.theirs.reset();
    ::close(kDebugChannelFd);  // the worker's alone: it sees EOF when the supervisor goes
    if (!cgroup_.empty()) cgroup_.attach(child_);
    unsigned char byte = go_flags();
    if (::write(go.write.get(), &byte, 1) != 1) throw_errno("write(go)");
    go.write.reset();
    std::string failure = read_to_eof(errors.read.get());
    if (!failure.empty()) throw SetupError(failure);
    null_stdio();
    worker_host_pid_ = child_;
    start_broker(broker.ours.get(), spec_.host_uid, spec_.host_gid, writable_roots);
    ready();
  }

  // The worker's filter listener, sent before its exec: from now on the broker decides every
  // change to a name. No listener, no session: the filter would leave those calls unanswered.
  void start_broker(int channel, uid_t sandbox_uid, gid_t sandbox_gid,
                    std::vector<std::string> writable_roots, Fd morgue = Fd(),
                    bool guard_last_names = false) {
    if (!spec_.broker) {
      notes_.push_back(
          "workspace broker: OFF (--bench-unbrokered-workspace, for the benchmark's comparison "
          "only): the sandbox may create, rename and remove any name in the workspace");
      return;
    }
    int status = 0;
    Fd listener = receive_fd(channel, status);
    if (!listener)
      throw SetupError("the worker sent no seccomp listener for the workspace broker (" +
                       (status > 0 ? errno_text(status) : std::string("none")) + ")");
    BrokerSettings settings;
    settings.workspace = spec_.workspace;
    // Degraded mode mounts no guard: what strict's mounts hold, the rule holds by name.
    bool landlocked = spec_.mode == JailSpec::Mode::landlock;
    std::vector<std::string> protect = spec_.protect_patterns;
    if (landlocked)
      for (auto& pattern : read_only_patterns(spec_.binds, spec_.workspace))
        protect.push_back(std::move(pattern));
    settings.links_by_name = landlocked;
    settings.rule = WorkspaceRule(protect, spec_.writable_patterns, spec_.hide_patterns);
    // Degraded mode's surveys find the held names alone: nothing is mounted, nothing measured.
    names_only_.hide = spec_.hide_patterns;
    names_only_.protect = protect;
    names_only_.writable = spec_.writable_patterns;
    held_ = watch_ ? watch_->held() : survey_workspace(spec_.workspace, names_only_).held;
    settings.held = held_;
    settings.writable_roots = std::move(writable_roots);
    settings.switch_ids = spec_.host_root;
    settings.host_uid = spec_.host_uid;
    settings.host_gid = spec_.host_gid;
    settings.sandbox_uid = sandbox_uid;
    settings.sandbox_gid = sandbox_gid;
    settings.morgue = std::move(morgue);
    settings.guard_last_names = guard_last_names;
    broker_.emplace(std::move(listener), std::move(settings), [this](const BrokerRefusal& r) {
      report(RefusalReport{r.path, r.change + ": " + r.reason});
    });
  }

  // Every report to the supervisor goes through here: the broker's thread sends refusals on
  // the same socket, a whole frame at a time.
  void report(const JailReport& what) {
    std::lock_guard<std::mutex> lock(report_mutex_);
    send_report(control_.get(), what);
  }

  // The full jail's writable places (mounts.cpp): the workspace, its private temporary
  // directories and home, and the devices bound in.
  std::vector<std::string> jail_writable_roots() const {
    std::vector<std::string> roots = {spec_.workspace, "/tmp", "/dev/shm", kSandboxHome};
    for (const auto& bind : spec_.binds)
      if (bind.kind == JailBind::Kind::device) roots.push_back(bind.target);
    return roots;
  }

  void ready() {
    // Without a memory cgroup, RLIMIT_AS caps each process; the session's total is watched here.
    if (!cgroup_.limits_memory() && spec_.memory_bytes > 0) {
      bool landlocked = spec_.mode == JailSpec::Mode::landlock;
      // Landlock mode: the worker and the orphans it leaves are our children (we are their
      // subreaper); namespaces: everything is under init.
      memory_.emplace(landlocked ? ::getpid() : child_, !landlocked, spec_.memory_bytes);
      next_sample_ = std::chrono::steady_clock::now();
      notes_.push_back(
          "memory: the warden samples the session's total (anonymous and shared "
          "memory, PSS, over every process) and stops the sandbox past --memory");
    }
    report(ReadyReport{worker_host_pid_, cgroup_.paths(), notes_});
  }

  // After setup: relay the worker's end, forward signals, and go when the jail is gone.
  int serve() {
    bool landlocked = spec_.mode == JailSpec::Mode::landlock;
    std::optional<ExitReport> exit_report;
    FrameReader requests(control_.get());
    bool requests_open = true;
    for (;;) {
      pollfd fds[3] = {{signals_.get(), POLLIN, 0},
                       {from_init_ ? from_init_.get() : -1, POLLIN, 0},
                       {requests_open ? control_.get() : -1, POLLIN, 0}};
      if (::poll(fds, 3, sample_timeout_ms()) < 0 && errno != EINTR) break;
      check_memory();
      if (fds[2].revents) {
        requests_open = !requests.fill() && !requests.broken();
        while (auto request = requests.next()) serve_request(*request);
      }
      if (fds[1].revents && reader_) {
        bool closed = read_exit(exit_report);
        if (closed) from_init_.reset();
      }
      if (!(fds[0].revents & POLLIN)) continue;
      signalfd_siginfo info{};
      if (::read(signals_.get(), &info, sizeof info) != sizeof info) continue;
      switch (info.ssi_signo) {
        case SIGINT:
          if (landlocked) {
            if (::kill(-child_, SIGINT) != 0) ::kill(child_, SIGINT);
          } else {
            ::kill(child_, SIGINT);  // init passes it on to the worker's process group
          }
          break;
        case SIGCHLD: {
          int status = 0;
          pid_t pid;
          bool child_gone = false;
          while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0)
            if (pid == child_) {
              child_gone = true;
              child_status_ = status;
            }
          if (child_gone) return finish(exit_report);
          break;
        }
        default:  // SIGTERM, SIGHUP, SIGQUIT: end the session
          if (landlocked) {
            ::kill(-child_, SIGKILL);
            ::kill(child_, SIGKILL);
          } else {
            ::kill(child_, SIGKILL);  // pid 1 gone: the kernel kills the whole namespace
          }
          if (!cgroup_.empty()) cgroup_.kill_all();
          break;
      }
    }
    return finish(exit_report);
  }

  // What init said after setup: only its exit report matters (anything garbled is dropped;
  // the exit status the warden reaps stands in). Returns whether init's end has closed.
  bool read_exit(std::optional<ExitReport>& exit_report) {
    bool closed = reader_->fill();
    while (auto frame = reader_->next()) {
      JailReport report = decode_from_init(*frame);
      if (auto* exit = std::get_if<ExitReport>(&report)) exit_report = *exit;
    }
    return closed || reader_->broken();
  }

  // Init's reports; one that won't decode is an error report naming why.
  static JailReport decode_from_init(const std::string& frame) {
    try {
      return decode_report(frame);
    } catch (const RecordError& e) {
      return ErrorReport{"jail init: a garbled report (" + e.message + ")"};
    }
  }

  // The supervisor's requests after setup. One kind: survey the workspace again.
  void serve_request(const std::string& frame) {
    SurveyRequest request;
    try {
      request = SurveyRequest::decode(frame);
    } catch (const RecordError&) {
      return;  // the supervisor is ours: a request it did not mean to send is dropped
    }
    SurveyReport reply;
    if (broker_) broker_->surveying();  // its guards are mounted as it goes
    std::optional<HeldNames> fresh;
    if (watch_) {
      reply = watch_->survey(request.baseline, request.measure);
      fresh = watch_->held();  // the last walk that succeeded
    } else if (broker_) {
      reply = survey_names_only(spec_.workspace, names_only_, fresh);
    }
    if (broker_ && fresh) hold(std::move(*fresh));
    if (broker_) broker_->invalidate();  // new masks, new environments: located folders again
    report(reply);
  }

  // The broker holds what the survey found. A file newly held that something holds open for
  // writing was most likely opened by the sandbox before the host made a link to it, and no
  // descriptor can be taken back: the sandbox is stopped (the session starts again at the next
  // cell), each such file said first.
  void hold(HeldNames fresh) {
    // Held first: from now on nothing opens them for writing, so a writer found below is one
    // that opened before and holds on (the second pass raced a check made before the hold).
    HeldNames before = std::exchange(held_, fresh);
    broker_->hold(std::move(fresh));
    OpenWriters writers = newly_held_writers(before, held_, spec_.workspace);
    if (writers.paths.empty() && !writers.too_many) return;
    for (const auto& path : writers.paths)
      report(RefusalReport{path,
                           "write: it was open for writing in the sandbox when the host "
                           "made it protected (a link to it): the sandbox was stopped"});
    if (writers.too_many)
      report(RefusalReport{"",
                           "write: more newly protected files than could be checked for "
                           "writers: the sandbox was stopped"});
    stop_sandbox();
  }

  int sample_timeout_ms() const {
    if (!memory_ || memory_over_) return -1;
    // Rounded up: a timeout of 0 while under a millisecond is left would spin.
    auto left = std::chrono::ceil<std::chrono::milliseconds>(next_sample_ -
                                                             std::chrono::steady_clock::now());
    return static_cast<int>(std::max<long long>(0, left.count()));
  }

  // Over the cap: the sandbox goes, as the OOM killer would end it in a cgroup.
  void check_memory() {
    if (!memory_ || memory_over_ || std::chrono::steady_clock::now() < next_sample_) return;
    SessionMemory::Sample s = memory_->sample();
    if (s.over) {
      // A vfork()ed child shows its parent's memory as its own until it execs: look again.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      s = memory_->sample();
      s.busy = true;
    }
    next_sample_ = std::chrono::steady_clock::now() + memory_->interval(s);
    if (!s.over) return;
    memory_over_ = true;
    memory_total_ = s.exact;
    stop_sandbox();
  }

  // Every process of the sandbox killed.
  void stop_sandbox() {
    if (spec_.mode == JailSpec::Mode::landlock) {
      // Killed, not reaped: the SIGCHLD of the worker itself is what ends serve().
      ::kill(-child_, SIGKILL);
      for (pid_t pid : jail_processes(::getpid(), false)) ::kill(pid, SIGKILL);
    } else {
      ::kill(child_, SIGKILL);  // pid 1 gone: the kernel kills the whole namespace
    }
  }

  int finish(std::optional<ExitReport> exit_report) {
    // Drain what init wrote just before it exited.
    if (reader_ && from_init_)
      while (!read_exit(exit_report)) {
      }
    if (!exit_report) {
      exit_report.emplace();
      if (WIFSIGNALED(child_status_))
        exit_report->signal = WTERMSIG(child_status_);
      else
        exit_report->code = WEXITSTATUS(child_status_);
    }
    if (spec_.mode == JailSpec::Mode::landlock) end_descendants();
    exit_report->memory_limit = (!cgroup_.empty() && cgroup_.oom_kills() > 0) || memory_over_;
    if (memory_over_) exit_report->memory_total_bytes = memory_total_;
    double cpu = cgroup_.empty() ? -1 : cgroup_.cpu_seconds();
    exit_report->cpu_ns = cpu < 0 ? -1 : static_cast<int64_t>(cpu * 1e9);
    exit_report->peak_memory_bytes = cgroup_.empty() ? 0 : cgroup_.peak_memory_bytes();
    report(*exit_report);
    cleanup();
    return 0;
  }

  // Landlock mode has no pid namespace: kill what the worker left behind (orphans were
  // reparented to us, the subreaper).
  void end_descendants() {
    if (!cgroup_.empty()) cgroup_.kill_all();
    for (int round = 0; round < 50; ++round) {
      auto pids = children_of(::getpid());
      for (pid_t pid : pids) ::kill(pid, SIGKILL);
      bool any = !pids.empty();
      int status;
      while (::waitpid(-1, &status, WNOHANG) > 0) {
      }
      if (!any) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  void cleanup() {
    // The session is over: nothing of it holds the morgue's files any more.
    if (watch_) watch_->sweep_morgue(true);
    if (!cgroup_.empty()) {
      cgroup_.remove_after_kill();
    }
    if (!session_dir_.empty()) remove_tree(session_dir_);
  }

  Fd control_;
  std::mutex report_mutex_;  // control_'s writes: the main thread's and the broker's
  Fd signals_;
  JailSpec spec_;
  std::vector<std::string> notes_;
  SandboxCgroup cgroup_;
  pid_t child_ = -1;  // init (namespaces) or the worker (landlock)
  int child_status_ = 0;
  pid_t worker_host_pid_ = -1;
  Fd from_init_;
  std::optional<FrameReader> reader_;
  std::optional<WorkspaceWatch> watch_;    // namespaces mode: the workspace's guards
  WorkspaceRules names_only_;              // degraded mode's surveys: the held names alone
  HeldNames held_;                         // what the broker holds now
  std::optional<WorkspaceBroker> broker_;  // every change to a name, decided before it is made
  std::string session_dir_;              // landlock mode: the private home and temporary directory
  std::optional<SessionMemory> memory_;  // no memory cgroup: the session's total, sampled
  std::chrono::steady_clock::time_point next_sample_;
  bool memory_over_ = false;
  uint64_t memory_total_ = 0;
};

}  // namespace

int run_warden(int control) {
  return Warden(control).run();
}

}  // namespace belljar
