#include "kernel/session/workspace_link.hpp"

#include "kernel/observability/diagnostics.hpp"
#include "kernel/protocol/replies.hpp"

namespace belljar {

void WorkspaceLink::request_survey(WorkspaceGuardChannel& guard, bool measure) {
  if (!guard.guards_workspace()) return;
  guard.request_survey(surveys_.baseline(), surveys_.measures(measure));
  surveys_.sent();
}

bool WorkspaceLink::hold(WorkspaceGuardChannel& guard, nlohmann::json& frame) {
  if (!guard.guards_workspace()) return false;
  surveys_.hold(std::move(frame));
  // Quick, names only (the timer's surveys measure the quota) unless the workspace is over its
  // quota: then it measures, so removing files gives the workspace back at the next cell.
  request_survey(guard, surveys_.measure_held());
  surveys_.gate_on_last_sent();  // the cell runs once this survey (made after it came) is in
  return true;
}

void WorkspaceLink::schedule(WorkspaceGuardChannel& guard, Clock::time_point now) {
  if (guard.guards_workspace() && surveys_.due(now)) request_survey(guard, true);
}

std::optional<WorkspaceLink::Clock::time_point> WorkspaceLink::next_due(
    const WorkspaceGuardChannel& guard) const {
  if (!guard.guards_workspace()) return std::nullopt;
  return surveys_.next_due();
}

// Both modes: each refusal was sent before the refused call returned, so one read at a cell's
// end finds all of that cell's.
void WorkspaceLink::take_refusals(WorkspaceGuardChannel& guard, const Cell* executing) {
  for (auto& refusal : guard.take_refusals()) {
    audit_.record("workspace_refusal", {{"path", refusal.path}, {"reason", refusal.reason}});
    surveys_.add_notice("[belljar] the sandbox may not change " + refusal.path + " (" +
                        refusal.reason +
                        "): refused. In the workspace it changes ordinary files and folders "
                        "only; --writable PATTERN opens a path.\n");
  }
  if (executing && !surveys_.holding()) tell_notices(executing);
}

std::optional<WorkspaceLink::Step> WorkspaceLink::take_survey(WorkspaceGuardChannel& guard,
                                                              Cell* executing) {
  std::optional<SurveyReport> survey = guard.take_survey();
  if (!survey) return std::nullopt;
  Step step;
  bool was_holding = surveys_.holding();
  WorkspaceSurveys::Answer answer =
      surveys_.answer(*survey, executing != nullptr, quota_bytes_, Clock::now());
  if (answer.failed) {
    log_line("workspace survey failed: " + survey->error);
    audit_.record("workspace_guard", {{"error", survey->error}});
    if (answer.fail_held)
      step.fail_held = "the workspace could not be checked for new secrets and host-run files (" +
                       survey->error + "); the cell was not run";
    return step;
  }
  size_t shown = 0, more = 0;
  for (const auto& guarded : survey->guarded) {
    if (shown++ < kGuardsAudited)
      audit_.record("workspace_guard", {{"path", guarded.path},
                                        {"guard", guard_kind_name(guarded.kind)},
                                        {"reason", guarded.reason}});
    else
      ++more;
  }
  if (more) audit_.record("workspace_guard", {{"more_paths", more}});
  if (answer.over_quota && executing && executing->limit_hit == LimitHit::none &&
      !executing->kill_at && !was_holding) {
    // Like the time limits: KeyboardInterrupt inside, named for what it was, kill in 2 s.
    executing->limit_hit = LimitHit::workspace;
    executing->kill_at = Clock::now() + std::chrono::seconds(2);
    guard.interrupt();
  }
  if (answer.release) {
    tell_notices(executing);
    step.release = std::move(answer.release);
  } else if (executing && !surveys_.holding()) {
    tell_notices(executing);
  }
  return step;
}

void WorkspaceLink::tell_notices(const Cell* executing) {
  if (!surveys_.has_notices() || !executing) return;
  client_.publish("stream", create_stream("stderr", surveys_.take_notices()), &executing->request);
}

}  // namespace belljar
