#pragma once
// A running Python worker: inside its jail (strict/degraded) or as a plain child (none).
// The supervisor owns one of these per session; it never blocks on it (start() aside, which
// waits for the jail to be built, typically tens of milliseconds).
#include <sys/types.h>

#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sandbox/jail_protocol/jail_channel.hpp"
#include "sandbox/jail_protocol/jail_reports.hpp"
#include "sandbox/layers/cgroup.hpp"
#include "sandbox/os/fd.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

// Why a layer could not be set up: names the step, the path and errno.
struct SandboxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How the worker ended, as the client is told.
struct WorkerExit {
  int exit_code = -1;         // >= 0 when it exited
  int signal = 0;             // > 0 when a signal killed it
  bool memory_limit = false;  // the kernel's OOM killer acted on the sandbox
  // Without a memory cgroup: what the session's processes held together when the warden
  // stopped it (jail_memory.hpp); 0 otherwise.
  uint64_t memory_total_bytes = 0;
  std::string describe() const;  // "exit status 3", "signal 11 (SIGSEGV)"
};

struct LayerReport;  // host_check.hpp
class JailHelper;    // jail_helper.hpp

struct WorkerLaunch {
  std::string python;                        // absolute path of the interpreter
  std::filesystem::path worker_package_dir;  // host directory holding belljar_worker/
  // The jail helper, opened when the kernel started (strict and degraded; unused by none).
  std::shared_ptr<const JailHelper> jail_helper = {};
  // Bound secrets (--secret): what the sandbox holds instead of each value, NAME=placeholder,
  // and the CA bundle (PEM) it trusts so the egress proxy can terminate those hosts' TLS.
  std::vector<std::pair<std::string, std::string>> secret_placeholders = {};
  std::string ca_bundle = {};
};

// The workspace guard's channel to the warden, as the supervisor's workspace link uses it
// (kernel/session/workspace_link.hpp), so that link can be driven without a sandbox: a survey
// asked for and its report, the broker's refusals, and the interrupt a quota passed sends.
class WorkspaceGuardChannel {
 public:
  virtual ~WorkspaceGuardChannel() = default;
  virtual bool guards_workspace() const = 0;
  virtual void request_survey(std::optional<uint64_t> baseline, bool measure) = 0;
  virtual std::optional<SurveyReport> take_survey() = 0;
  virtual std::vector<RefusalReport> take_refusals() = 0;
  virtual void interrupt() = 0;
};

// The sandbox's controls a cell's limits use (kernel/session/cell_limits.hpp), for the same
// reason: its CPU clock, the interrupt a limit sends, the kill if it is ignored, and the memory
// cap %%limits moves for one cell.
class LimitedSandbox {
 public:
  virtual ~LimitedSandbox() = default;
  virtual double cpu_seconds() const = 0;
  virtual void interrupt() = 0;
  virtual void kill() = 0;
  virtual bool set_memory_limit(uint64_t bytes, std::string* why) = 0;
};

class WorkerProcess final : public WorkspaceGuardChannel, public LimitedSandbox {
 public:
  // Starts the worker; throws SandboxError when a layer the policy needs fails (the message
  // is the one line to show: the failing step, its path and errno, or the missing layer and
  // its fix). Nothing is left running when it throws.
  //
  // strict/degraded: the jail is launch.jail_helper (`belljar-jail`, sandbox/jail/main.cpp),
  // exec'd from the descriptor the kernel opened at start. The thread calling start() must
  // outlive the worker: the jail gets SIGKILL when it exits (PR_SET_PDEATHSIG).
  static WorkerProcess start(const Policy& policy, const WorkerLaunch& launch);
  // The same, planned against a given host report instead of this host's probed one (tests
  // use it to see what a host without, say, user namespaces gets).
  static WorkerProcess start(const Policy& policy, const WorkerLaunch& launch,
                             const LayerReport& host);

  WorkerProcess(WorkerProcess&& other) noexcept;
  WorkerProcess& operator=(WorkerProcess&& other) noexcept;
  ~WorkerProcess();  // kills and reaps whatever is still running

  int frames_fd() const { return frames_.get(); }  // socketpair end: fd 3 in the worker
  int debug_fd() const { return debug_.get(); }    // socketpair end: fd 4, the debug channel
  int stdout_fd() const { return stdout_.get(); }  // read end of the worker's fd 1
  int stderr_fd() const { return stderr_.get(); }  // read end of the worker's fd 2
  // Becomes readable (EOF) when the jail is gone; poll it and then call poll_exit(). -1 in
  // isolation none.
  // The warden's reports; -1 once they have ended (nothing more to poll for).
  int status_fd() const { return status_reader_ && status_reader_->closed() ? -1 : status_.get(); }
  pid_t pid() const { return pid_; }                // the direct child the supervisor reaps
  pid_t worker_pid() const { return worker_pid_; }  // the Python process, as the host sees it
  // What this sandbox lacks or does differently from the full jail (degraded mode, rlimits
  // standing in for cgroups, ...), one line each, for the banner and the audit log.
  const std::vector<std::string>& notes() const { return notes_; }
  // The supervisor's end of the egress channel (egress_proxy.hpp): connections made inside to
  // 127.0.0.1:3128 arrive on it. Empty without --allow-net, or without a network namespace.
  // The caller hands it to the EgressProxy.
  Fd take_egress_channel() { return std::move(egress_channel_); }

  // The workspace guard: ask the warden to survey the workspace again (strict mode: its guards
  // and the quota, workspace_watch.hpp; both modes: the names protected links lead through,
  // held_names.hpp); its reply arrives on status_fd() and is taken with take_survey().
  bool guards_workspace() const override { return guards_workspace_; }
  void request_survey(std::optional<uint64_t> baseline, bool measure) override;
  std::optional<SurveyReport> take_survey() override;
  // The broker's refusals (each path once), in the order it made them.
  std::vector<RefusalReport> take_refusals() override;

  void interrupt() override;  // SIGINT to the Python process (its process group)
  void kill() override;       // SIGKILL to everything in the sandbox
  // Non-blocking: the exit once the direct child has been reaped.
  std::optional<WorkerExit> poll_exit();
  // CPU seconds and peak resident bytes of the sandbox so far (best effort, 0 if unknown).
  // The sandbox's memory cap, moved for one cell (see SandboxCgroup::set_memory_limit).
  bool set_memory_limit(uint64_t bytes, std::string* why) override;
  // The sandbox's CPU plus the workspace broker's (the warden's thread that answers the
  // worker's calls: its work is the session's, so asking it is no way around --cpu). Without a
  // cgroup counting it, the CPU of the jail's process tree from /proc: init's (strict) or, in
  // degraded mode, every child of the warden, the worker's subreaper (orphans included).
  double cpu_seconds() const override;
  // CPU the supervisor spent on this worker's behalf (draining its pipes, handling its frames):
  // added to cpu_seconds(), so flooding the supervisor is no way around --cpu either.
  void charge_supervisor_cpu(double seconds) {
    if (seconds > 0) supervisor_cpu_ += seconds;
  }
  uint64_t peak_memory_bytes() const;

 private:
  WorkerProcess() = default;
  // The warden's setup, read on its control socket until it reports ready (the worker's pid,
  // its cgroup and notes; the socket then carries the session's reports) or fails, within 30 s.
  // A failure kills and reaps the warden and throws SandboxError with its one line.
  void await_ready(Fd control, bool namespaces, std::string morgue_workspace);
  void read_status();
  void end();                 // kill, reap and release the cgroup
  double warden_cpu() const;  // the warden's own CPU seconds so far, every thread (kept once gone)

  pid_t pid_ = -1;
  pid_t worker_pid_ = -1;
  pid_t init_pid_ = -1;  // the jail's init as the host sees it (namespaces mode)
  Fd frames_, debug_, stdout_, stderr_;
  Fd status_;  // jail: the warden's control socket (setup result, then the exit report)
  std::optional<FrameReader> status_reader_;
  Fd egress_channel_;
  SandboxCgroup cgroup_;  // the sandbox's cgroup, as the warden's ready report names it
  bool cgroup_released_ = true;
  std::vector<std::string> notes_;
  std::optional<ExitReport> exit_report_;
  std::deque<SurveyReport> surveys_;
  std::vector<RefusalReport> refusals_;
  bool guards_workspace_ = false;
  // Landlock mode: the warden has a private directory on the host's /tmp to remove at the end,
  // so it is asked to end (SIGTERM) before it is killed.
  bool landlocked_ = false;
  // Namespaces mode: the workspace whose morgue (workspace_guard.hpp) end() removes this
  // warden's folder of.
  std::string morgue_workspace_;
  std::optional<WorkerExit> exit_;
  mutable double last_cpu_ = 0;
  mutable double warden_cpu_ = 0;
  double supervisor_cpu_ = 0;
  mutable uint64_t last_peak_ = 0;
};

}  // namespace belljar
