#pragma once
// When the workspace guard surveys, and what each survey means for the session: a part of the
// Kernel with one job, kept apart from its sockets and records so that it is tested alone
// (tests/unit/kernel/session/workspace_surveys.cpp). The Kernel asks it when to send a survey
// to the warden, hands it each survey that comes back, and does what the answer says: audit,
// tell the learner, stop the cell at the quota, run the cell that waited.
//
// Two uses. Before a cell runs, the warden surveys the workspace again (a secret saved on the
// host, a .git made by the last cell) and the cell waits for that survey: it is held here until
// a survey sent after it came is in, and never runs over a workspace the survey could not check
// (fail closed). While the session lives, surveys repeat on a timer that keeps their cost to a
// few per cent of one core and catches a burst of writes within 50 ms: the quota's measure.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "sandbox/jail_client/worker_process.hpp"

namespace belljar {

class WorkspaceSurveys {
 public:
  using Clock = std::chrono::steady_clock;

  // While a cell runs, surveys come every 50 ms while the workspace grows, backing off to one
  // a second while it does not; idle, every 3 s. The period is at least 50 times a survey's
  // duration (2% of a core), 10 times (10%) while a running cell is filling the workspace.
  static constexpr auto kWhileGrowing = std::chrono::milliseconds(50);
  static constexpr auto kWhileRunning = std::chrono::milliseconds(1000);
  static constexpr auto kWhileIdle = std::chrono::milliseconds(3000);
  static constexpr double kCostShare = 50;
  static constexpr double kCostShareWhileGrowing = 10;
  static constexpr size_t kMaxNotices = 16384;  // bytes of notices kept for the next cell

  // A new warden answers none of the old one's surveys; the quota's baseline and what was
  // added stay (they are the session's, across restarts of the sandbox).
  void new_warden();

  // Whether the survey about to be sent measures bytes: the very first one always does (it is
  // the quota's baseline), whatever asked for it.
  bool measures(bool asked) const { return asked || !baseline_; }
  std::optional<uint64_t> baseline() const { return baseline_; }
  void sent() { ++sent_; }

  // The execute frame waits for a survey sent after it came: hold(), send that survey (it
  // measures when the workspace is over its quota, so removing files gives it back at this
  // cell: `measure_held()`), then gate_on_last_sent().
  void hold(nlohmann::json frame) { held_ = std::move(frame); }
  bool measure_held() const { return quota_told_; }
  void gate_on_last_sent() { gate_ = sent_; }
  bool holding() const { return held_.has_value(); }

  // The timer: true when a survey is due now (none is outstanding and the period is up).
  bool due(Clock::time_point now);
  // When the next timed survey is due, if one is scheduled.
  std::optional<Clock::time_point> next_due() const { return next_; }

  // What one survey means; the Kernel acts on it.
  struct Answer {
    bool failed = false;      // the survey could not check the workspace (error text below)
    bool fail_held = false;   // ... and the held cell waited for it: fail that cell closed
    bool over_quota = false;  // the session's writes are past --workspace-quota
    std::optional<nlohmann::json> release;  // the held frame, to run now
  };
  // `executing`: a cell is running (or held); `quota_bytes`: --workspace-quota, for the text.
  Answer answer(const SurveyReport& survey, bool executing, uint64_t quota_bytes,
                Clock::time_point now);

  // What to tell the learner on the running cell's stderr, gathered from the guards, the
  // quota and the broker's refusals (add_notice); taken once told.
  void add_notice(const std::string& text);
  bool has_notices() const { return !notices_.empty(); }
  std::string take_notices();

 private:
  uint64_t sent_ = 0, answered_ = 0, gate_ = 0;
  std::optional<nlohmann::json> held_;
  std::optional<Clock::time_point> next_;
  Clock::duration period_{};
  uint64_t bytes_ = 0;  // the last measure
  std::optional<uint64_t> baseline_;
  uint64_t added_ = 0;
  bool quota_told_ = false;
  std::string notices_;
};

}  // namespace belljar
