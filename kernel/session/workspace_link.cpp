// The workspace guard's reports (sandbox/jail/workspace_watch.hpp, as SurveyReport:
// sandbox/jail_protocol/jail_reports.hpp), read on the reactor: before a
// cell runs the warden surveys the workspace again (a secret saved on the host, a .git made by
// the last cell) and the cell waits for that survey; while the session lives, surveys repeat on
// a timer that keeps their cost to a few per cent of one core. Each new guard is audited and
// told to the learner; past --workspace-quota the running cell is stopped like any limit.
#include <algorithm>

#include "kernel/protocol/replies.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

namespace {
// While a cell runs, surveys come every 50 ms while the workspace grows (a burst of writes is
// caught within that: the page cache takes in a few GB a second), backing off to one a second
// while it does not; idle, every 3 s.
constexpr auto kSurveyWhileGrowing = std::chrono::milliseconds(50);
constexpr auto kSurveyWhileRunning = std::chrono::milliseconds(1000);
constexpr auto kSurveyWhileIdle = std::chrono::milliseconds(3000);
// The period is at least 50 times a survey's duration (2% of a core), 10 times (10%) while a
// running cell is filling the workspace: a burst is what the quota is there to catch.
constexpr double kSurveyCostShare = 50;
constexpr double kSurveyCostShareWhileGrowing = 10;
constexpr size_t kGuardsAudited = 50;  // per survey; the rest are counted
}  // namespace

bool Kernel::surveys_workspace() const {
  return worker_ && worker_->guards_workspace();
}

void Kernel::request_survey(bool measure) {
  if (!surveys_workspace()) return;
  // The very first survey measures, whatever asked for it: it is the quota's baseline.
  worker_->request_survey(workspace_baseline_, measure || !workspace_baseline_);
  ++surveys_sent_;
}

void Kernel::hold_for_survey(json frame) {
  held_frame_ = std::move(frame);
  // Quick, names only (the timer's surveys measure the quota) unless the workspace is over its
  // quota: then it measures, so removing files gives the workspace back at the next cell.
  request_survey(quota_told_);
  survey_gate_ = surveys_sent_;  // the cell runs once this survey (made after it came) is in
}

void Kernel::schedule_survey(Clock::time_point now) {
  if (!surveys_workspace() || surveys_answered_ < surveys_sent_) return;
  if (!next_survey_) next_survey_ = now + kSurveyWhileIdle;
  if (now >= *next_survey_) {
    request_survey(true);
    next_survey_.reset();
  }
}

// The workspace broker's refusals (both modes): each was sent before the refused call
// returned, so one read at a cell's end finds all of that cell's.
void Kernel::handle_refusals() {
  if (!worker_) return;
  for (auto& refusal : worker_->take_refusals()) {
    audit_.record("workspace_refusal", {{"path", refusal.path}, {"reason", refusal.reason}});
    workspace_notices_ += "[belljar] the sandbox may not change " + refusal.path + " (" +
                          refusal.reason +
                          "): refused. In the workspace it changes ordinary files and folders "
                          "only; --writable PATTERN opens a path.\n";
  }
  if (executing() && !held_frame_) tell_workspace_notices();
}

void Kernel::handle_surveys() {
  while (auto survey = worker_->take_survey()) {
    ++surveys_answered_;
    // The session's starting point for --workspace-quota: the first survey it ever got (no
    // code has run before the first cell's), kept across restarts of the sandbox.
    if (!workspace_baseline_ && survey->bytes) workspace_baseline_ = *survey->bytes;
    double ms = survey->micros / 1000.0;
    uint64_t bytes = survey->bytes.value_or(survey_bytes_);
    if (!executing())
      survey_period_ = kSurveyWhileIdle;
    else if (held_frame_ || bytes != survey_bytes_)
      survey_period_ = kSurveyWhileGrowing;
    else
      survey_period_ = std::min<Clock::duration>(survey_period_ * 2, kSurveyWhileRunning);
    survey_bytes_ = bytes;
    double share =
        survey_period_ == kSurveyWhileGrowing ? kSurveyCostShareWhileGrowing : kSurveyCostShare;
    auto cost = std::chrono::milliseconds(static_cast<long>(ms * share));
    next_survey_ = Clock::now() + std::max<Clock::duration>(survey_period_, cost);

    if (!survey->error.empty()) {
      log_line("workspace survey failed: " + survey->error);
      audit_.record("workspace_guard", {{"error", survey->error}});
      if (held_frame_ && surveys_answered_ >= survey_gate_) {
        // Fail closed: a cell never runs over a workspace the guard could not check.
        held_frame_.reset();
        fail_cell("WorkspaceGuardError",
                  "the workspace could not be checked for new secrets and host-run files (" +
                      survey->error + "); the cell was not run",
                  CellStatus::error);
      }
      continue;
    }
    size_t shown = 0, more = 0;
    for (const auto& guard : survey->guarded) {
      const std::string& path = guard.path;
      if (shown++ < kGuardsAudited)
        audit_.record(
            "workspace_guard",
            {{"path", path}, {"guard", guard_kind_name(guard.kind)}, {"reason", guard.reason}});
      else
        ++more;
      if (guard.kind == GuardKind::read_only)
        workspace_notices_ += "[belljar] " + path +
                              " appeared in the workspace while this session ran. Host tools "
                              "(git, direnv, editors, shells) execute or obey it, so it is "
                              "read-only to the sandbox from now on; if code in this session "
                              "made it, inspect it before running those tools here.\n";
      else
        workspace_notices_ += "[belljar] " + path + " is masked inside the sandbox (" +
                              (guard.reason.empty() ? "secret" : guard.reason) + ").\n";
    }
    if (more) audit_.record("workspace_guard", {{"more_paths", more}});
    if (workspace_notices_.size() > 16384) workspace_notices_.resize(16384);

    bool over = survey->over_quota;
    if (over && executing() && cell_->limit_hit == LimitHit::none && !cell_->kill_at &&
        !held_frame_) {
      // Like the time limits: KeyboardInterrupt inside, named for what it was, kill in 2 s.
      cell_->limit_hit = LimitHit::workspace;
      cell_->kill_at = Clock::now() + std::chrono::seconds(2);
      worker_->interrupt();
    }
    if (survey->added_bytes) workspace_added_ = *survey->added_bytes;
    // Said when the workspace turns read-only, and again to each cell that starts while it is.
    if (over && (!quota_told_ || held_frame_))
      workspace_notices_ +=
          "[belljar] the session has added " + format_size(workspace_added_) +
          " to the workspace, over its --workspace-quota of " +
          format_size(options_.policy.workspace_quota_bytes) +
          ": the workspace is read-only to the sandbox until files are removed.\n";
    quota_told_ = over;
    if (executing() && !held_frame_) tell_workspace_notices();
    if (held_frame_ && surveys_answered_ >= survey_gate_) {
      tell_workspace_notices();
      json frame = std::move(*held_frame_);
      held_frame_.reset();
      send_to_worker(frame);
    }
  }
}

void Kernel::tell_workspace_notices() {
  if (workspace_notices_.empty() || !executing()) return;
  publish("stream", create_stream("stderr", workspace_notices_), &cell_->request);
  workspace_notices_.clear();
}

}  // namespace belljar
