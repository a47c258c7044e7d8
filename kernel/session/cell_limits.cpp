#include "kernel/session/cell_limits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/session/asked_limits.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {
constexpr double kWallClockNear = 0.5;  // seconds: CPU sampling's step, and then some
}  // namespace

void CellLimits::check(Cell& cell, LimitedSandbox& sandbox, Clock::time_point now) {
  if (cell.kill_at) {
    if (now >= *cell.kill_at) {
      // The code ignored the interrupt: the sandbox goes, the workspace stays.
      log_line("cell ignored the interrupt for 2 s: killing the worker");
      cell.kill_at = now + std::chrono::hours(24);
      sandbox.kill();
    }
    return;
  }
  double cpu = sandbox.cpu_seconds();
  cell.paused.sample_cpu(cpu);
  if (cell.paused.forfeit_if_busy(now)) {
    // The worker said its main thread was paused while the session burned CPU: not believed.
    log_.log("debug pause not believed",
             "the session used CPU while the worker said it was paused");
    audit_.record("debug_pause_refused",
                  {{"cpu_seconds", std::round(cell.paused.cpu_while_paused() * 10) / 10},
                   {"paused_seconds", std::round(cell.paused.total(now) * 10) / 10},
                   {"execution_count", cell.execution_count}});
  }
  LimitHit hit = LimitHit::none;
  double counted = counted_seconds(cell, now);
  if (counted >= cell.timeout)
    hit = LimitHit::timeout;
  else if (cpu - cell.cpu_at_start >= cell.cpu_limit && counted + kWallClockNear < cell.timeout)
    // One busy thread reaches both at once when --cpu is --timeout (the default); the wall
    // clock, due within kWallClockNear, is the limit its reader expects named. CPU that ran
    // ahead of the clock (threads, processes, a claimed pause) is ended here.
    hit = LimitHit::cpu;
  if (hit == LimitHit::none) return;
  cell.limit_hit = hit;
  cell.kill_at = now + std::chrono::seconds(2);
  cell.paused.resume(now);  // the interrupt resumes a paused main thread
  sandbox.interrupt();
}

double CellLimits::counted_seconds(const Cell& cell, Clock::time_point now) const {
  return std::chrono::duration<double>(now - cell.started).count() -
         cell.paused.credited(now, policy_.debug_pause_seconds);
}

CellLimits::Clock::time_point CellLimits::timeout_deadline(const Cell& cell,
                                                           Clock::time_point now) const {
  // Moves while the cell is paused, and is worked out afresh at every turn of the reactor.
  return cell.paused.deadline(cell.started, cell.timeout, policy_.debug_pause_seconds, now);
}

void CellLimits::note_pause(Cell* cell, const LimitedSandbox* sandbox, bool paused,
                            Clock::time_point now) {
  if (!cell) return;
  // What the session used so far is charged to the state it was in.
  if (sandbox) cell->paused.sample_cpu(sandbox->cpu_seconds());
  if (paused && !cell->kill_at)
    cell->paused.pause(now);
  else
    cell->paused.resume(now);
}

double CellLimits::request_started(double cpu) {
  double background = background_.spent(cpu);
  background_.request_started(cpu);
  return background;
}

bool CellLimits::check_between_cells(const LimitedSandbox& sandbox, Clock::time_point now,
                                     int last_execution_count, const WireMessage* last_parent) {
  // Code a cell left running (a daemon thread) is bounded by --cpu too.
  if (now < next_cpu_sample_) return false;
  next_cpu_sample_ = now + kBackgroundSample;
  double spent = background_.spent(sandbox.cpu_seconds());
  double limit = policy_.cpu_limit();
  if (spent < limit) return false;
  char text[256];
  std::snprintf(text, sizeof text,
                "code left running after cell [%d] used %.1f s of CPU while no cell ran, past the "
                "CPU-time limit of %g s (--cpu): the sandbox was restarted; variables were lost, "
                "workspace files were kept",
                last_execution_count, spent, limit);
  audit_.record("background_cpu", {{"cpu_seconds", std::round(spent * 10) / 10},
                                   {"limit_seconds", limit},
                                   {"after_execution_count", last_execution_count}});
  metrics_.limit_hit(LimitHit::cpu);
  // Told at once to whoever ran the last cell, and again by the next cell's reply.
  if (last_parent)
    client_.publish("stream", create_stream("stderr", "\n[belljar] " + std::string(text) + "\n"),
                    last_parent);
  background_stop_ = text;
  return true;
}

nlohmann::json CellLimits::ask(Cell& cell, LimitedSandbox* sandbox, const nlohmann::json& frame,
                               OutputBudget& budget) {
  // %%limits may only tighten: decided by decide_asked_limits (asked_limits.hpp), enforced here.
  auto decided = decide_asked_limits(frame, policy_);
  std::string refused;
  if (auto* why = std::get_if<std::string>(&decided)) refused = *why;
  AskedLimits asked = refused.empty() ? std::get<AskedLimits>(decided) : AskedLimits{};
  if (refused.empty() && asked.memory) {
    std::string why;
    if (!sandbox || !sandbox->set_memory_limit(*asked.memory, &why))
      refused = "--memory can't be set for this cell: " + why;
    else
      cell.memory_limit = *asked.memory;
  }
  if (!refused.empty()) return {{"type", "limits_reply"}, {"ok", false}, {"error", refused}};
  cell.magic_timeout = asked.timeout;
  cell.magic_cpu = asked.cpu;
  if (asked.timeout)
    cell.timeout = std::min(cell.timeout, *asked.timeout + counted_seconds(cell, Clock::now()));
  if (asked.cpu) cell.cpu_limit = std::min(cell.cpu_limit, *asked.cpu);
  // Lower only, keeping what the cell already used: a forged frame can't buy more output.
  if (asked.output) budget.lower(*asked.output);
  return {{"type", "limits_reply"}, {"ok", true}};
}

void CellLimits::name_limit_in_error(const Cell& cell, std::string& ename, std::string& evalue,
                                     nlohmann::json& traceback) const {
  // The limit's interrupt surfaced in the cell as KeyboardInterrupt: the error names the limit.
  if (cell.limit_hit == LimitHit::workspace) {
    ename = "WorkspaceQuotaError";
    evalue = "the session passed its --workspace-quota of " +
             format_size(policy_.workspace_quota_bytes) +
             " and the cell was interrupted; the workspace is read-only to the sandbox until "
             "files are removed; variables were kept";
    traceback.push_back(ename + ": " + evalue);
  } else if (cell.limit_hit != LimitHit::none) {
    // The limit's interrupt surfaced as KeyboardInterrupt: name the limit instead.
    bool cpu = cell.limit_hit == LimitHit::cpu;
    std::optional<double> asked = cpu ? cell.magic_cpu : cell.magic_timeout;
    char limit[64];
    std::snprintf(limit, sizeof limit, "%g s",
                  asked ? *asked
                  : cpu ? cell.cpu_limit
                        : cell.timeout);
    ename = "TimeoutError";
    evalue = "the cell passed its " + std::string(cpu ? "CPU-time" : "wall-clock") + " limit of " +
             limit + " (" + (asked ? "%%limits " : "") + (cpu ? "--cpu" : "--timeout") +
             ") and was interrupted; variables were kept";
    double paused = cell.paused.total(Clock::now());
    if (!cpu && paused >= policy_.debug_pause_seconds) {
      // Paused past its allowance: the paused time beyond it was counted.
      char spent[160];
      std::snprintf(spent, sizeof spent,
                    " (it was paused in the debugger for %.1f s, past its pause allowance of %g s: "
                    "--debug-pause)",
                    paused, policy_.debug_pause_seconds);
      evalue += spent;
    }
    if (cell.paused.forfeited()) {
      char spent[224];
      std::snprintf(spent, sizeof spent,
                    " (the pause the session claimed was not counted: it used %.1f s of CPU while "
                    "it said it was paused, and a paused thread uses none)",
                    cell.paused.cpu_while_paused());
      evalue += spent;
    }
    if (cpu && cell.background_cpu >= 0.05) {
      char spent[96];
      std::snprintf(spent, sizeof spent, " (%.1f s of it spent between cells by code left running)",
                    cell.background_cpu);
      evalue += spent;
    }
    traceback.push_back(ename + ": " + evalue);
  }
}

CellLimits::Failure CellLimits::after_exit(Cell& cell, const WorkerExit& exit,
                                           const std::string& cause) const {
  bool executing = cell.kind == RequestKind::execute;
  if (executing && cell.kill_at && cell.limit_hit == LimitHit::workspace)
    return {"WorkspaceQuotaError",
            "the session passed its --workspace-quota and the cell ignored the interrupt for "
            "2 s: the sandbox was restarted; variables were lost, workspace files were kept",
            CellStatus::workspace_quota};
  if (executing && cell.kill_at)
    return {"TimeoutError",
            "the cell passed its " +
                std::string(cell.limit_hit == LimitHit::cpu ? "CPU-time" : "wall-clock") +
                " limit and ignored the interrupt for 2 s: the sandbox was restarted; variables "
                "were lost, workspace files were kept",
            CellStatus::timeout};
  if (exit.memory_limit) {
    if (executing) cell.limit_hit = LimitHit::memory;
    return {"MemoryError",
            "the session passed its memory limit of " +
                format_size(cell.memory_limit ? cell.memory_limit : policy_.memory_bytes) +
                (cell.memory_limit ? " (%%limits --memory)" : " (--memory)") +
                (exit.memory_total_bytes
                     ? ": its processes held " + format_size(exit.memory_total_bytes) + " together"
                     : "") +
                "; the worker was restarted: variables were lost, workspace files were kept",
            CellStatus::memory};
  }
  return {"WorkerDied",
          "the Python worker died (" + cause +
              "); a fresh worker was started: variables were lost, workspace files were kept",
          CellStatus::crashed};
}

}  // namespace belljar
