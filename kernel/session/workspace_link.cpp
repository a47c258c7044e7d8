// The workspace guard's reports (sandbox/jail/workspace_watch.hpp, as SurveyReport:
// sandbox/jail_protocol/jail_reports.hpp), read on the reactor. When to survey and what a
// survey means are WorkspaceSurveys' (workspace_surveys.hpp); here the Kernel acts on it: each
// new guard is audited and told to the learner, past --workspace-quota the running cell is
// stopped like any limit, a cell held for its survey runs or fails closed.
#include "kernel/protocol/replies.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

namespace {
constexpr size_t kGuardsAudited = 50;  // per survey; the rest are counted
}  // namespace

bool Kernel::surveys_workspace() const {
  return worker_ && worker_->guards_workspace();
}

void Kernel::request_survey(bool measure) {
  if (!surveys_workspace()) return;
  worker_->request_survey(surveys_.baseline(), surveys_.measures(measure));
  surveys_.sent();
}

void Kernel::hold_for_survey(json frame) {
  surveys_.hold(std::move(frame));
  // Quick, names only (the timer's surveys measure the quota) unless the workspace is over its
  // quota: then it measures, so removing files gives the workspace back at the next cell.
  request_survey(surveys_.measure_held());
  surveys_.gate_on_last_sent();  // the cell runs once this survey (made after it came) is in
}

void Kernel::schedule_survey(Clock::time_point now) {
  if (surveys_workspace() && surveys_.due(now)) request_survey(true);
}

// The workspace broker's refusals (both modes): each was sent before the refused call
// returned, so one read at a cell's end finds all of that cell's.
void Kernel::handle_refusals() {
  if (!worker_) return;
  for (auto& refusal : worker_->take_refusals()) {
    audit_.record("workspace_refusal", {{"path", refusal.path}, {"reason", refusal.reason}});
    surveys_.add_notice("[belljar] the sandbox may not change " + refusal.path + " (" +
                        refusal.reason +
                        "): refused. In the workspace it changes ordinary files and folders "
                        "only; --writable PATTERN opens a path.\n");
  }
  if (executing() && !surveys_.holding()) tell_workspace_notices();
}

void Kernel::handle_surveys() {
  while (auto survey = worker_->take_survey()) {
    bool was_holding = surveys_.holding();
    WorkspaceSurveys::Answer answer =
        surveys_.answer(*survey, executing(), options_.policy.workspace_quota_bytes, Clock::now());
    if (answer.failed) {
      log_line("workspace survey failed: " + survey->error);
      audit_.record("workspace_guard", {{"error", survey->error}});
      if (answer.fail_held)
        fail_cell("WorkspaceGuardError",
                  "the workspace could not be checked for new secrets and host-run files (" +
                      survey->error + "); the cell was not run",
                  CellStatus::error);
      continue;
    }
    size_t shown = 0, more = 0;
    for (const auto& guard : survey->guarded) {
      if (shown++ < kGuardsAudited)
        audit_.record("workspace_guard", {{"path", guard.path},
                                          {"guard", guard_kind_name(guard.kind)},
                                          {"reason", guard.reason}});
      else
        ++more;
    }
    if (more) audit_.record("workspace_guard", {{"more_paths", more}});
    if (answer.over_quota && executing() && cell_->limit_hit == LimitHit::none && !cell_->kill_at &&
        !was_holding) {
      // Like the time limits: KeyboardInterrupt inside, named for what it was, kill in 2 s.
      cell_->limit_hit = LimitHit::workspace;
      cell_->kill_at = Clock::now() + std::chrono::seconds(2);
      worker_->interrupt();
    }
    if (answer.release) {
      tell_workspace_notices();
      hand_to_worker(*answer.release);
    } else if (executing() && !surveys_.holding()) {
      tell_workspace_notices();
    }
  }
}

void Kernel::tell_workspace_notices() {
  if (!surveys_.has_notices() || !executing()) return;
  client_.publish("stream", create_stream("stderr", surveys_.take_notices()), &cell_->request);
}

}  // namespace belljar
