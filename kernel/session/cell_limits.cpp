// The cell's limits, enforced by the supervisor: the wall-clock and CPU-time limits (an
// interrupt, then the sandbox goes 2 s later), CPU spent by code left running between cells,
// what %%limits asks for (only ever tighter than the policy, parsed with the command line's own
// grammar), and the errors that name the limit a cell hit. The worker only asks; a forged
// frame can lower its own limits, never raise them. The one exception, bounded: time the worker
// says its main thread was paused in the debugger is not counted by --timeout, up to
// --debug-pause a cell (docs/design/debugger.md §4), and only while the session uses next to no
// CPU (a paused thread uses none: PausedTime::forfeit_if_busy). CPU, memory and processes count
// as ever: the CPU cap is checked whatever --timeout is (threads and child processes spend CPU
// faster than the wall clock runs, and a pause stops the wall clock only).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/session/asked_limits.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/kernel.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

namespace {
constexpr double kWallClockNear = 0.5;  // seconds: CPU sampling's step, and then some
}  // namespace

void Kernel::check_limits(Clock::time_point now) {
  if (!running_code() || !worker_) return;
  if (cell_->kill_at) {
    if (now >= *cell_->kill_at) {
      // The code ignored the interrupt: the sandbox goes, the workspace stays.
      log_line("cell ignored the interrupt for 2 s: killing the worker");
      cell_->kill_at = now + std::chrono::hours(24);
      worker_->kill();
    }
    return;
  }
  double cpu = worker_->cpu_seconds();
  cell_->paused.sample_cpu(cpu);
  if (cell_->paused.forfeit_if_busy(now)) {
    // The worker said its main thread was paused while the session burned CPU: not believed.
    frame_log_.log("debug pause not believed",
                   "the session used CPU while the worker said it was paused");
    audit_.record("debug_pause_refused",
                  {{"cpu_seconds", std::round(cell_->paused.cpu_while_paused() * 10) / 10},
                   {"paused_seconds", std::round(cell_->paused.total(now) * 10) / 10},
                   {"execution_count", cell_->execution_count}});
  }
  LimitHit hit = LimitHit::none;
  double counted = counted_seconds(now);
  if (counted >= cell_->timeout)
    hit = LimitHit::timeout;
  else if (cpu - cell_->cpu_at_start >= cell_->cpu_limit &&
           counted + kWallClockNear < cell_->timeout)
    // One busy thread reaches both at once when --cpu is --timeout (the default); the wall
    // clock, due within kWallClockNear, is the limit its reader expects named. CPU that ran
    // ahead of the clock (threads, processes, a claimed pause) is ended here.
    hit = LimitHit::cpu;
  if (hit == LimitHit::none) return;
  cell_->limit_hit = hit;
  cell_->kill_at = now + std::chrono::seconds(2);
  cell_->paused.resume(now);  // the interrupt resumes a paused main thread
  worker_->interrupt();
}

double Kernel::counted_seconds(Clock::time_point now) const {
  return std::chrono::duration<double>(now - cell_->started).count() -
         cell_->paused.credited(now, options_.policy.debug_pause_seconds);
}

Clock::time_point Kernel::timeout_deadline(Clock::time_point now) const {
  // Moves while the cell is paused, and is worked out afresh at every turn of the reactor.
  return cell_->paused.deadline(cell_->started, cell_->timeout, options_.policy.debug_pause_seconds,
                                now);
}

void Kernel::note_debug_pause(bool paused, Clock::time_point now) {
  // A pause in code run between requests credits whichever request runs, if any.
  if (!cell_) return;
  // What the session used so far is charged to the state it was in.
  if (worker_) cell_->paused.sample_cpu(worker_->cpu_seconds());
  if (paused && !cell_->kill_at)
    cell_->paused.pause(now);
  else
    cell_->paused.resume(now);
}

void Kernel::check_background_cpu(Clock::time_point now) {
  // Sampled once a second while no request runs: code a cell left running (a daemon thread)
  // is bounded by --cpu too.
  if (cell_ || !worker_ || !worker_ready_ || now < next_cpu_sample_) return;
  next_cpu_sample_ = now + std::chrono::seconds(1);
  double spent = background_.spent(worker_->cpu_seconds());
  double limit = options_.policy.cpu_limit();
  if (spent < limit) return;
  char text[256];
  std::snprintf(text, sizeof text,
                "code left running after cell [%d] used %.1f s of CPU while no cell ran, past the "
                "CPU-time limit of %g s (--cpu): the sandbox was restarted; variables were lost, "
                "workspace files were kept",
                execution_count_, spent, limit);
  audit_.record("background_cpu", {{"cpu_seconds", std::round(spent * 10) / 10},
                                   {"limit_seconds", limit},
                                   {"after_execution_count", execution_count_}});
  metrics_.limit_hit(LimitHit::cpu);
  // Told at once to whoever ran the last cell, and again by the next cell's reply.
  if (const WireMessage* last_cell = idle_.last_cell())
    client_.publish("stream", create_stream("stderr", "\n[belljar] " + std::string(text) + "\n"),
                    last_cell);
  background_stop_ = text;
  restart_worker("background CPU past --cpu");
}

void Kernel::handle_limits(const json& frame) {
  // %%limits may only tighten: decided by decide_asked_limits (asked_limits.hpp), enforced here.
  auto decided = decide_asked_limits(frame, options_.policy);
  std::string refused;
  if (auto* why = std::get_if<std::string>(&decided)) refused = *why;
  AskedLimits asked = refused.empty() ? std::get<AskedLimits>(decided) : AskedLimits{};
  if (refused.empty() && asked.memory) {
    std::string why;
    if (!worker_ || !worker_->set_memory_limit(*asked.memory, &why))
      refused = "--memory can't be set for this cell: " + why;
    else
      cell_->memory_limit = *asked.memory;
  }
  if (!refused.empty()) {
    send_to_worker({{"type", "limits_reply"}, {"ok", false}, {"error", refused}});
    return;
  }
  cell_->magic_timeout = asked.timeout;
  cell_->magic_cpu = asked.cpu;
  if (asked.timeout)
    cell_->timeout = std::min(cell_->timeout, *asked.timeout + counted_seconds(Clock::now()));
  if (asked.cpu) cell_->cpu_limit = std::min(cell_->cpu_limit, *asked.cpu);
  // Lower only, keeping what the cell already used: a forged frame can't buy more output.
  if (asked.output) budget_.lower(*asked.output);
  send_to_worker({{"type", "limits_reply"}, {"ok", true}});
}

void Kernel::name_limit_in_error(std::string& ename, std::string& evalue, json& traceback) const {
  // The limit's interrupt surfaced in the cell as KeyboardInterrupt: the error names the limit.
  if (cell_->limit_hit == LimitHit::workspace) {
    ename = "WorkspaceQuotaError";
    evalue = "the session passed its --workspace-quota of " +
             format_size(options_.policy.workspace_quota_bytes) +
             " and the cell was interrupted; the workspace is read-only to the sandbox until "
             "files are removed; variables were kept";
    traceback.push_back(ename + ": " + evalue);
  } else if (cell_->limit_hit != LimitHit::none) {
    // The limit's interrupt surfaced as KeyboardInterrupt: name the limit instead.
    bool cpu = cell_->limit_hit == LimitHit::cpu;
    std::optional<double> asked = cpu ? cell_->magic_cpu : cell_->magic_timeout;
    char limit[64];
    std::snprintf(limit, sizeof limit, "%g s",
                  asked ? *asked
                  : cpu ? cell_->cpu_limit
                        : cell_->timeout);
    ename = "TimeoutError";
    evalue = "the cell passed its " + std::string(cpu ? "CPU-time" : "wall-clock") + " limit of " +
             limit + " (" + (asked ? "%%limits " : "") + (cpu ? "--cpu" : "--timeout") +
             ") and was interrupted; variables were kept";
    double paused = cell_->paused.total(Clock::now());
    if (!cpu && paused >= options_.policy.debug_pause_seconds) {
      // Paused past its allowance: the paused time beyond it was counted.
      char spent[160];
      std::snprintf(spent, sizeof spent,
                    " (it was paused in the debugger for %.1f s, past its pause allowance of %g s: "
                    "--debug-pause)",
                    paused, options_.policy.debug_pause_seconds);
      evalue += spent;
    }
    if (cell_->paused.forfeited()) {
      char spent[224];
      std::snprintf(spent, sizeof spent,
                    " (the pause the session claimed was not counted: it used %.1f s of CPU while "
                    "it said it was paused, and a paused thread uses none)",
                    cell_->paused.cpu_while_paused());
      evalue += spent;
    }
    if (cpu && cell_->background_cpu >= 0.05) {
      char spent[96];
      std::snprintf(spent, sizeof spent, " (%.1f s of it spent between cells by code left running)",
                    cell_->background_cpu);
      evalue += spent;
    }
    traceback.push_back(ename + ": " + evalue);
  }
}

void Kernel::fail_cell_after_exit(const WorkerExit& exit, const std::string& cause) {
  // The cell the worker died under fails naming why: a limit it ignored, memory, or a crash.
  if (cell_) {
    if (executing() && cell_->kill_at && cell_->limit_hit == LimitHit::workspace) {
      fail_cell("WorkspaceQuotaError",
                "the session passed its --workspace-quota and the cell ignored the interrupt for "
                "2 s: the sandbox was restarted; variables were lost, workspace files were kept",
                CellStatus::workspace_quota);
    } else if (executing() && cell_->kill_at) {
      fail_cell(
          "TimeoutError",
          "the cell passed its " +
              std::string(cell_->limit_hit == LimitHit::cpu ? "CPU-time" : "wall-clock") +
              " limit and ignored the interrupt for 2 s: the sandbox was restarted; variables "
              "were lost, workspace files were kept",
          CellStatus::timeout);
    } else if (exit.memory_limit) {
      if (executing()) cell_->limit_hit = LimitHit::memory;
      fail_cell(
          "MemoryError",
          "the session passed its memory limit of " +
              format_size(cell_->memory_limit ? cell_->memory_limit
                                              : options_.policy.memory_bytes) +
              (cell_->memory_limit ? " (%%limits --memory)" : " (--memory)") +
              (exit.memory_total_bytes
                   ? ": its processes held " + format_size(exit.memory_total_bytes) + " together"
                   : "") +
              "; the worker was restarted: variables were lost, "
              "workspace files were kept",
          CellStatus::memory);
    } else {
      fail_cell("WorkerDied",
                "the Python worker died (" + cause +
                    "); a fresh worker was started: variables were lost, "
                    "workspace files were kept",
                CellStatus::crashed);
    }
  }
}

}  // namespace belljar
