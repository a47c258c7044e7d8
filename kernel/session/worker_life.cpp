#include "kernel/session/worker_life.hpp"

#include <algorithm>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/output/active_output.hpp"

namespace belljar {

bool WorkerLife::start_failed(const std::string& why, Clock::time_point now) {
  if (restarts_ == 0 && failed_starts_ == 0) return false;  // at launch: refuse to start
  start_error_ = why;
  schedule_restart(start_error_, now);
  return true;
}

bool WorkerLife::hello(const nlohmann::json& frame) {
  if (ready_) return false;
  // Built by the supervisor: the frontend loads codemirror_mode as a script path.
  auto info = frame.find("language_info");
  language_info_ =
      language_info_from_worker(info != frame.end() ? *info : nlohmann::json::object());
  ready_ = true;
  start_error_.clear();
  failed_starts_ = 0;
  return true;
}

WorkerLife::AfterExit WorkerLife::exited(const std::string& cause, bool shutting_down,
                                         Clock::time_point now) {
  bool was_ready = ready_;
  ready_ = false;
  ++restarts_;
  if (shutting_down) return AfterExit::none;
  if (was_ready) {
    failed_starts_ = 0;
    return AfterExit::start_now;
  }
  start_error_ = "the Python worker exited before it was ready (" + cause + ")";
  schedule_restart(start_error_, now);
  return AfterExit::back_off;
}

void WorkerLife::reset() {
  ready_ = false;
  restart_at_.reset();
  ++restarts_;
  failed_starts_ = 0;
}

bool WorkerLife::take_restart(Clock::time_point now) {
  if (!restart_at_ || now < *restart_at_) return false;
  restart_at_.reset();
  return true;
}

void WorkerLife::schedule_restart(const std::string& why, Clock::time_point now) {
  // Back off when the worker keeps dying at once, so a broken interpreter can't spin us.
  ++failed_starts_;
  auto delay = std::chrono::milliseconds(std::min(5000, 50 << std::min(failed_starts_, 7)));
  log_line("worker restart in " + std::to_string(delay.count()) + " ms: " + why);
  restart_at_ = now + delay;
}

}  // namespace belljar
