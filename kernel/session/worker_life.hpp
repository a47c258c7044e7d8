#pragma once
// The worker's life as the Kernel tracks it, a state machine of its own: starting (a sandbox
// launched, no hello yet), ready (its hello taken: language_info built by the supervisor,
// language_info_from_worker), or waiting to start again after a failure (why, for the requests
// that cannot wait: start_error). A worker that exits once ready is started again at once; one
// that exits before its hello, or whose sandbox cannot be started after a restart, is started
// again after a back-off (50 ms << failed starts, up to 5 s), so a broken interpreter that dies
// at once cannot spin the kernel. The first start's failure is no failure to retry: the kernel
// refuses to start rather than run with less (SandboxError reaches run()'s caller). A second
// hello is refused: what the worker said of itself is said once, before it runs any code.
// MCP's reset_session starts a fresh worker at once, whatever came before. The part holds no
// process: the Kernel keeps the WorkerProcess and tells this part what became of it.
// Doors: none; its facts are handed in as arguments (the time, the exit's cause, the notes), and
// each back-off is said on stderr (diagnostics.hpp), as the kernel's other diagnostics are.
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace belljar {

class WorkerLife {
 public:
  using Clock = std::chrono::steady_clock;

  // What follows a worker's exit.
  enum class AfterExit {
    none,       // the kernel is shutting down: nothing is started again
    start_now,  // it had been ready: a fresh worker at once
    back_off,   // it died before its hello: started again at restart_due()
  };

  // A sandbox is being launched: not ready until it says hello.
  void starting() { ready_ = false; }
  // The launch failed (`why`: for the queued requests). False at launch, changing nothing: the
  // kernel refuses to start. Else the start is retried after the back-off.
  [[nodiscard]] bool start_failed(const std::string& why, Clock::time_point now);
  // The launch succeeded; `notes` say what the sandbox lacks (WorkerProcess::notes).
  void started(std::vector<std::string> notes) { notes_ = std::move(notes); }
  // The worker's hello frame: false for a second one (refused, changing nothing).
  [[nodiscard]] bool hello(const nlohmann::json& frame);
  // The worker exited (`cause`: WorkerExit::describe); a restart counts.
  AfterExit exited(const std::string& cause, bool shutting_down, Clock::time_point now);
  // MCP's reset_session: the worker is replaced at once, any pending restart dropped; a restart
  // counts. A start failure from here on is retried, not a refusal to start. The last failure
  // stays said (start_error) until a fresh worker says hello.
  void reset();
  // Whether the restart the back-off scheduled is due now: taken once.
  [[nodiscard]] bool take_restart(Clock::time_point now);

  bool ready() const { return ready_; }
  // Why no worker is ready, once a start failed or it died before its hello; "" otherwise.
  const std::string& start_error() const { return start_error_; }
  std::optional<Clock::time_point> restart_due() const { return restart_at_; }
  const nlohmann::json& language_info() const { return language_info_; }
  // What the running sandbox lacks or does differently: for the banner, kernel_info_reply
  // (belljar.notes) and the audit log.
  const std::vector<std::string>& notes() const { return notes_; }
  // Workers replaced since the kernel started (exits and resets).
  int restarts() const { return restarts_; }

 private:
  void schedule_restart(const std::string& why, Clock::time_point now);

  bool ready_ = false;
  nlohmann::json language_info_ = nlohmann::json::object();
  std::vector<std::string> notes_;
  std::optional<Clock::time_point> restart_at_;
  int failed_starts_ = 0;  // in a row: the back-off's exponent
  std::string start_error_;
  int restarts_ = 0;
};

}  // namespace belljar
