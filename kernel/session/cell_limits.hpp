#pragma once
// A cell's limits, enforced by the supervisor: the wall-clock and CPU-time limits (an interrupt,
// then the sandbox goes 2 s later), CPU spent by code left running between cells
// (background_cpu.hpp: charged to the next cell, and the sandbox restarted when it alone passes
// --cpu), what %%limits asks for (only ever tighter than the policy, parsed with the command
// line's own grammar: asked_limits.hpp), and the errors that name the limit a cell hit. The
// worker only asks; a forged frame can lower its own limits, never raise them. The one exception,
// bounded: time the worker says its main thread was paused in the debugger is not counted by
// --timeout, up to --debug-pause a cell (docs/design/debugger.md §4), and only while the session
// uses next to no CPU (a paused thread uses none: PausedTime::forfeit_if_busy). CPU, memory and
// processes count as ever: the CPU cap is checked whatever --timeout is (threads and child
// processes spend CPU faster than the wall clock runs, and a pause stops the wall clock only).
// Doors: the policy, the audit log, the metrics, the diagnostics log, the client (the notice of a
// sandbox stopped between cells); the sandbox's controls and the cell, given per call.
#include <chrono>
#include <optional>
#include <string>

#include "kernel/observability/audit_log.hpp"
#include "kernel/observability/diagnostics.hpp"
#include "kernel/observability/metrics.hpp"
#include "kernel/output/output_stream.hpp"
#include "kernel/session/background_cpu.hpp"
#include "kernel/session/cell.hpp"
#include "kernel/session/doors.hpp"
#include "sandbox/jail_client/worker_process.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

class CellLimits {
 public:
  using Clock = std::chrono::steady_clock;

  CellLimits(const Policy& policy, AuditRecords& audit, Metrics& metrics, RateLimitedLog& log,
             ClientDoor& client)
      : policy_(policy), audit_(audit), metrics_(metrics), log_(log), client_(client) {}

  // The running request's limits, at each turn of the reactor: past its timeout or its CPU, the
  // sandbox is interrupted (the code's KeyboardInterrupt is named for the limit) and killed if
  // it ignores that for 2 s.
  void check(Cell& cell, LimitedSandbox& sandbox, Clock::time_point now);
  // The running request's time so far that --timeout counts: paused time is not, up to the
  // pause allowance (--debug-pause).
  double counted_seconds(const Cell& cell, Clock::time_point now) const;
  // When --timeout is due; moves while the cell is paused.
  Clock::time_point timeout_deadline(const Cell& cell, Clock::time_point now) const;
  // The worker's word on its main thread (debug_state): paused in the debugger, or running.
  // A pause in code run between requests credits whichever request runs, if any.
  void note_pause(Cell* cell, const LimitedSandbox* sandbox, bool paused, Clock::time_point now);

  // CPU between cells (background_cpu.hpp): the clock at each of these moments.
  void worker_ready(double cpu) { background_.worker_ready(cpu); }
  // A request starts: what the session spent since the last cell ended, charged to it.
  double request_started(double cpu);
  void request_finished(double cpu, bool was_cell) { background_.request_finished(cpu, was_cell); }
  // Sampled every kBackgroundSample while no request runs: true when code a cell left running
  // passed --cpu, audited and told to whoever ran the last cell: the sandbox must be restarted.
  bool check_between_cells(const LimitedSandbox& sandbox, Clock::time_point now,
                           int last_execution_count, const WireMessage* last_parent);
  // When the next sample between cells is due: the reactor wakes for it. Without this the
  // sample waited for whatever woke the reactor next, up to twice the interval, and a session's
  // two busy threads overran --cpu 3 by 1.9 s.
  Clock::time_point background_sample_due() const { return next_cpu_sample_; }
  // Half a second: the overrun is at most this times the CPUs the session keeps busy, and an
  // idle kernel on a hub wakes twice a second for it.
  static constexpr std::chrono::milliseconds kBackgroundSample{500};
  // Why the sandbox was stopped between cells, for the next cell's error; once.
  std::optional<std::string> take_background_stop() {
    return std::exchange(background_stop_, std::nullopt);
  }

  // %%limits, asked by the running cell's worker: the limits_reply frame to send. A memory cap
  // is moved on `sandbox` (null: none to move); output is only ever lowered on `budget`.
  nlohmann::json ask(Cell& cell, LimitedSandbox* sandbox, const nlohmann::json& frame,
                     OutputBudget& budget);
  // The limit's interrupt surfaced in the cell as KeyboardInterrupt: the error names the limit.
  void name_limit_in_error(const Cell& cell, std::string& ename, std::string& evalue,
                           nlohmann::json& traceback) const;
  // The cell the worker died under fails naming why: a limit it ignored, memory, or a crash.
  struct Failure {
    std::string ename, evalue;
    CellStatus status;
  };
  Failure after_exit(Cell& cell, const WorkerExit& exit, const std::string& cause) const;

 private:
  const Policy& policy_;
  AuditRecords& audit_;
  Metrics& metrics_;
  RateLimitedLog& log_;
  ClientDoor& client_;
  BackgroundCpu background_;
  Clock::time_point next_cpu_sample_{};
  std::optional<std::string> background_stop_;  // why the sandbox was stopped between cells
};

}  // namespace belljar
