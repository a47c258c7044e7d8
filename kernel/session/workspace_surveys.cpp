#include "kernel/session/workspace_surveys.hpp"

#include <algorithm>

#include "sandbox/policy/quantities.hpp"

namespace belljar {

void WorkspaceSurveys::new_warden() {
  sent_ = answered_ = gate_ = 0;
  held_.reset();
  next_.reset();
}

bool WorkspaceSurveys::due(Clock::time_point now) {
  if (answered_ < sent_) return false;
  if (!next_) next_ = now + kWhileIdle;
  if (now < *next_) return false;
  next_.reset();
  return true;
}

WorkspaceSurveys::Answer WorkspaceSurveys::answer(const SurveyReport& survey, bool executing,
                                                  uint64_t quota_bytes, Clock::time_point now) {
  ++answered_;
  Answer out;
  // The session's starting point for --workspace-quota: the first survey it ever got (no code
  // has run before the first cell's), kept across restarts of the sandbox.
  if (!baseline_ && survey.bytes) baseline_ = *survey.bytes;
  uint64_t bytes = survey.bytes.value_or(bytes_);
  if (!executing)
    period_ = kWhileIdle;
  else if (held_ || bytes != bytes_)
    period_ = kWhileGrowing;
  else
    period_ = std::min<Clock::duration>(period_ * 2, kWhileRunning);
  bytes_ = bytes;
  double share = period_ == kWhileGrowing ? kCostShareWhileGrowing : kCostShare;
  auto cost =
      std::chrono::microseconds(static_cast<long>(static_cast<double>(survey.micros) * share));
  next_ = now + std::max<Clock::duration>(period_, cost);

  bool gate_open = held_ && answered_ >= gate_;
  if (!survey.error.empty()) {
    out.failed = true;
    if (gate_open) {
      // Fail closed: a cell never runs over a workspace the guard could not check.
      held_.reset();
      out.fail_held = true;
    }
    return out;
  }
  for (const auto& guard : survey.guarded) {
    if (guard.kind == GuardKind::read_only)
      add_notice("[belljar] " + guard.path +
                 " appeared in the workspace while this session ran. Host tools (git, direnv, "
                 "editors, shells) execute or obey it, so it is read-only to the sandbox from "
                 "now on; if code in this session made it, inspect it before running those "
                 "tools here.\n");
    else
      add_notice("[belljar] " + guard.path + " is masked inside the sandbox (" +
                 (guard.reason.empty() ? "secret" : guard.reason) + ").\n");
  }
  out.over_quota = survey.over_quota;
  if (survey.added_bytes) added_ = *survey.added_bytes;
  // Said when the workspace turns read-only, and again to each cell that starts while it is.
  if (out.over_quota && (!quota_told_ || held_))
    add_notice("[belljar] the session has added " + format_size(added_) +
               " to the workspace, over its --workspace-quota of " + format_size(quota_bytes) +
               ": the workspace is read-only to the sandbox until files are removed.\n");
  quota_told_ = out.over_quota;
  if (gate_open) {
    out.release = std::move(*held_);
    held_.reset();
  }
  return out;
}

void WorkspaceSurveys::add_notice(const std::string& text) {
  notices_ += text;
  if (notices_.size() > kMaxNotices) notices_.resize(kMaxNotices);
}

std::string WorkspaceSurveys::take_notices() {
  return std::exchange(notices_, std::string());
}

}  // namespace belljar
