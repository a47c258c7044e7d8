// When the workspace is surveyed and what a survey means, alone: a cell waits for a survey sent
// after it came and never runs over a workspace that could not be checked; the timer keeps
// surveys cheap and quick while the workspace grows; the quota is said once, and again to each
// cell held while it holds.
#include "kernel/session/workspace_surveys.hpp"

#include <catch2/catch.hpp>

using namespace belljar;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

using Clock = WorkspaceSurveys::Clock;

SurveyReport measured(uint64_t bytes, uint64_t micros = 100) {
  SurveyReport survey;
  survey.bytes = bytes;
  survey.micros = micros;
  return survey;
}

// What the Kernel does to send a survey.
void send(WorkspaceSurveys& surveys) {
  surveys.sent();
}

// What the Kernel does with an execute frame: held, then its survey sent, then gated.
void hold_cell(WorkspaceSurveys& surveys, json frame) {
  surveys.hold(std::move(frame));
  send(surveys);
  surveys.gate_on_last_sent();
}

}  // namespace

TEST_CASE("a held cell runs once a survey sent after it is in, not an earlier one",
          "[workspace_surveys]") {
  WorkspaceSurveys surveys;
  Clock::time_point now{};
  send(surveys);  // a timed survey, already on its way when the cell came
  hold_cell(surveys, {{"type", "execute"}, {"id", "1"}});
  auto early = surveys.answer(measured(10), true, 1 << 20, now);
  CHECK_FALSE(early.release);  // made before the cell came: files since may be unguarded
  CHECK(surveys.holding());
  auto late = surveys.answer(measured(10), true, 1 << 20, now);
  REQUIRE(late.release);
  CHECK((*late.release)["id"] == "1");
  CHECK_FALSE(surveys.holding());
}

TEST_CASE("a survey that failed fails the held cell closed, and nothing else",
          "[workspace_surveys]") {
  WorkspaceSurveys surveys;
  hold_cell(surveys, {{"type", "execute"}});
  SurveyReport failed;
  failed.error = "cannot read a folder";
  auto answer = surveys.answer(failed, true, 1 << 20, Clock::time_point{});
  CHECK(answer.failed);
  CHECK(answer.fail_held);
  CHECK_FALSE(answer.release);
  CHECK_FALSE(surveys.holding());
  // the same failure with no cell waiting fails nothing
  auto again = surveys.answer(failed, false, 1 << 20, Clock::time_point{});
  CHECK(again.failed);
  CHECK_FALSE(again.fail_held);
}

TEST_CASE("the timer: idle every 3 s, running, 50 ms while growing, backing off to 1 s",
          "[workspace_surveys]") {
  WorkspaceSurveys surveys;
  Clock::time_point now{};
  CHECK_FALSE(surveys.due(now));  // the first call schedules
  CHECK(*surveys.next_due() == now + 3s);
  CHECK_FALSE(surveys.due(now + 2999ms));
  CHECK(surveys.due(now + 3s));
  send(surveys);
  CHECK_FALSE(surveys.due(now + 10s));  // one outstanding: never two at once

  surveys.answer(measured(100), false, 1 << 20, now);
  CHECK(*surveys.next_due() == now + 3s);
  surveys.answer(measured(200), true, 1 << 20, now);  // a cell wrote 100 bytes
  CHECK(*surveys.next_due() == now + 50ms);
  surveys.answer(measured(200), true, 1 << 20, now);  // it stopped writing: back off
  CHECK(*surveys.next_due() == now + 100ms);
  for (int i = 0; i < 10; ++i) surveys.answer(measured(200), true, 1 << 20, now);
  CHECK(*surveys.next_due() == now + 1s);
  // A slow survey is spaced out to keep its share of a core: 50 times its duration, 10 times
  // while the workspace grows.
  surveys.answer(measured(200, 100'000), true, 1 << 20, now);
  CHECK(*surveys.next_due() == now + 5s);
  surveys.answer(measured(300, 100'000), true, 1 << 20, now);
  CHECK(*surveys.next_due() == now + 1s);
}

TEST_CASE("the first survey measures and is the quota's baseline, kept across wardens",
          "[workspace_surveys]") {
  WorkspaceSurveys surveys;
  CHECK(surveys.measures(false));  // no baseline yet
  surveys.answer(measured(4096), false, 1 << 20, Clock::time_point{});
  CHECK(surveys.baseline() == 4096u);
  CHECK_FALSE(surveys.measures(false));
  CHECK(surveys.measures(true));
  surveys.answer(measured(9999), false, 1 << 20, Clock::time_point{});
  CHECK(surveys.baseline() == 4096u);
  surveys.new_warden();
  CHECK(surveys.baseline() == 4096u);
}

TEST_CASE("over the quota: said once, again to a held cell, measured when a cell is held",
          "[workspace_surveys]") {
  WorkspaceSurveys surveys;
  SurveyReport over = measured(64 << 20);
  over.over_quota = true;
  over.added_bytes = 40u << 20;
  auto answer = surveys.answer(over, true, 32u << 20, Clock::time_point{});
  CHECK(answer.over_quota);
  std::string told = surveys.take_notices();
  CHECK(told.find("added 40.0 MiB") != std::string::npos);
  CHECK(told.find("--workspace-quota of 32.0 MiB") != std::string::npos);
  surveys.answer(over, true, 32u << 20, Clock::time_point{});
  CHECK_FALSE(surveys.has_notices());  // not again while the same cell runs
  CHECK(surveys.measure_held());       // the next cell's survey measures: files may be gone
  hold_cell(surveys, {{"type", "execute"}});
  surveys.answer(over, true, 32u << 20, Clock::time_point{});
  CHECK(surveys.take_notices().find("read-only to the sandbox") != std::string::npos);
  SurveyReport under = measured(1 << 20);
  surveys.answer(under, true, 32u << 20, Clock::time_point{});
  CHECK_FALSE(surveys.measure_held());
}

TEST_CASE("guards become notices, and notices are bounded", "[workspace_surveys]") {
  WorkspaceSurveys surveys;
  SurveyReport survey = measured(1);
  survey.guarded.push_back({".env", GuardKind::mask, "secret"});
  survey.guarded.push_back({".git/config", GuardKind::read_only, ""});
  surveys.answer(survey, true, 1 << 20, Clock::time_point{});
  std::string told = surveys.take_notices();
  CHECK(told.find(".env is masked inside the sandbox (secret)") != std::string::npos);
  CHECK(told.find(".git/config appeared in the workspace") != std::string::npos);
  CHECK_FALSE(surveys.has_notices());
  for (int i = 0; i < 10'000; ++i) surveys.add_notice("[belljar] a refusal, again\n");
  CHECK(surveys.take_notices().size() == WorkspaceSurveys::kMaxNotices);
}
