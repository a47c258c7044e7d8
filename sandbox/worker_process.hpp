#pragma once
// A running Python worker: inside its jail (strict/degraded) or as a plain child (none).
// The supervisor owns one of these per session; it never blocks on it.
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/fd.hpp"
#include "sandbox/policy.hpp"

namespace belljar {

// Why a layer could not be set up: names the step, the path and errno.
struct SandboxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How the worker ended, as the client is told.
struct WorkerExit {
  int exit_code = -1;   // >= 0 when it exited
  int signal = 0;       // > 0 when a signal killed it
  bool memory_limit = false;  // the kernel's OOM killer acted on the sandbox
  std::string describe() const;  // "exit status 3", "signal 11 (SIGSEGV)"
};

struct WorkerLaunch {
  std::string python;                       // absolute path of the interpreter
  std::filesystem::path worker_package_dir; // host directory holding belljar_worker/
};

class WorkerProcess {
 public:
  // Starts the worker; throws SandboxError when a layer the policy needs fails.
  static WorkerProcess start(const Policy& policy, const WorkerLaunch& launch);

  WorkerProcess(WorkerProcess&&) noexcept = default;
  WorkerProcess& operator=(WorkerProcess&&) noexcept = default;
  ~WorkerProcess();  // kills and reaps whatever is still running

  int frames_fd() const { return frames_.get(); }   // socketpair end: fd 3 in the worker
  int stdout_fd() const { return stdout_.get(); }   // read end of the worker's fd 1
  int stderr_fd() const { return stderr_.get(); }   // read end of the worker's fd 2
  pid_t pid() const { return pid_; }                // the direct child the supervisor reaps

  void interrupt();  // SIGINT to the Python process
  void kill();       // SIGKILL to everything in the sandbox
  // Non-blocking: the exit once the direct child has been reaped.
  std::optional<WorkerExit> poll_exit();
  // CPU seconds and peak resident bytes of the sandbox so far (best effort, 0 if unknown).
  double cpu_seconds() const;
  uint64_t peak_memory_bytes() const;

 private:
  WorkerProcess() = default;
  pid_t pid_ = -1;
  Fd frames_, stdout_, stderr_;
  Fd status_;       // jail: the init's report of the worker's exit
  std::optional<WorkerExit> exit_;
  friend class Jail;
};

}  // namespace belljar
