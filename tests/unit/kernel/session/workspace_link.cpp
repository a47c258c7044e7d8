// The workspace link alone, on a fake warden channel (our WorkspaceGuardChannel) and fake doors:
// a cell is held for a survey asked after it came and released by it; a survey that could not
// check the workspace fails the held cell closed; each guard and refusal is audited and told to
// the running cell; past the quota the running cell is interrupted once, named for the quota;
// a sandbox that guards no workspace holds nothing and is asked nothing.
#include "kernel/session/workspace_link.hpp"

#include <catch2/catch.hpp>
#include <deque>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

namespace {

class FakeWarden final : public WorkspaceGuardChannel {
 public:
  bool guards_workspace() const override { return guards; }
  void request_survey(std::optional<uint64_t> baseline, bool measure) override {
    asked.push_back({baseline, measure});
  }
  std::optional<SurveyReport> take_survey() override {
    if (surveys.empty()) return std::nullopt;
    SurveyReport next = std::move(surveys.front());
    surveys.pop_front();
    return next;
  }
  std::vector<RefusalReport> take_refusals() override { return std::exchange(refusals, {}); }
  void interrupt() override { ++interrupts; }

  bool guards = true;
  std::vector<std::pair<std::optional<uint64_t>, bool>> asked;
  std::deque<SurveyReport> surveys;
  std::vector<RefusalReport> refusals;
  int interrupts = 0;
};

SurveyReport measured(uint64_t bytes) {
  SurveyReport survey;
  survey.bytes = bytes;
  survey.micros = 100;
  return survey;
}

Cell running_cell(const std::string& msg_id) {
  Cell cell;
  cell.request = request("execute_request", msg_id);
  cell.kind = RequestKind::execute;
  return cell;
}

struct Rig {
  FakeAudit audit;
  FakeClient client;
  FakeWarden warden;
  WorkspaceLink link{audit, client, 32u << 20};
};

}  // namespace

TEST_CASE("workspace link: a cell is held until a survey asked after it is in",
          "[workspace_link]") {
  Rig rig;
  Cell cell = running_cell("m1");
  json frame = {{"type", "execute"}, {"id", "r1"}};
  REQUIRE(rig.link.hold(rig.warden, frame));
  REQUIRE(rig.warden.asked.size() == 1);
  CHECK(rig.warden.asked[0].second);  // the first survey measures: the quota's baseline
  CHECK_FALSE(rig.link.take_survey(rig.warden, &cell));  // nothing in yet
  rig.warden.surveys.push_back(measured(1000));
  auto step = rig.link.take_survey(rig.warden, &cell);
  REQUIRE(step);
  REQUIRE(step->release);
  CHECK((*step->release)["id"] == "r1");
  CHECK_FALSE(step->fail_held);
}

TEST_CASE("workspace link: a survey that could not check the workspace fails the held cell",
          "[workspace_link]") {
  Rig rig;
  Cell cell = running_cell("m1");
  json frame = {{"type", "execute"}, {"id", "r1"}};
  REQUIRE(rig.link.hold(rig.warden, frame));
  SurveyReport failed;
  failed.error = "EACCES on notes/";
  rig.warden.surveys.push_back(failed);
  auto step = rig.link.take_survey(rig.warden, &cell);
  REQUIRE(step);
  CHECK_FALSE(step->release);
  REQUIRE(step->fail_held);
  CHECK(step->fail_held->find("EACCES on notes/") != std::string::npos);
  REQUIRE(rig.audit.of("workspace_guard").size() == 1);
  CHECK(rig.audit.of("workspace_guard")[0]["error"] == "EACCES on notes/");
}

TEST_CASE("workspace link: each new guard is audited, past the cap only counted",
          "[workspace_link]") {
  Rig rig;
  SurveyReport survey = measured(1000);
  for (size_t i = 0; i < WorkspaceLink::kGuardsAudited + 5; ++i)
    survey.guarded.push_back({"secret" + std::to_string(i) + ".pem", GuardKind::mask, "*.pem"});
  rig.warden.surveys.push_back(survey);
  REQUIRE(rig.link.take_survey(rig.warden, nullptr));
  auto records = rig.audit.of("workspace_guard");
  REQUIRE(records.size() == WorkspaceLink::kGuardsAudited + 1);
  CHECK(records[0]["path"] == "secret0.pem");
  CHECK(records.back()["more_paths"] == 5);
}

TEST_CASE("workspace link: a refusal is audited and told to the running cell", "[workspace_link]") {
  Rig rig;
  Cell cell = running_cell("m7");
  rig.warden.refusals = {{".bashrc", "create: a dot-path, which host tools read"}};
  rig.link.take_refusals(rig.warden, &cell);
  REQUIRE(rig.audit.of("workspace_refusal").size() == 1);
  auto told = rig.client.of("stream");
  REQUIRE(told.size() == 1);
  CHECK(told[0].parent == "m7");
  CHECK(told[0].content["text"].get<std::string>().find(".bashrc") != std::string::npos);
}

TEST_CASE("workspace link: a refusal waits while a cell is held for its survey",
          "[workspace_link]") {
  Rig rig;
  Cell cell = running_cell("m2");
  json frame = {{"type", "execute"}, {"id", "r2"}};
  REQUIRE(rig.link.hold(rig.warden, frame));
  rig.warden.refusals = {{".gitconfig", "create: a dot-path, which host tools read"}};
  rig.link.take_refusals(rig.warden, &cell);
  CHECK(rig.client.of("stream").empty());
  rig.warden.surveys.push_back(measured(10));
  auto step = rig.link.take_survey(rig.warden, &cell);
  REQUIRE((step && step->release));
  REQUIRE(rig.client.of("stream").size() == 1);  // told as the cell is released
}

TEST_CASE("workspace link: past the quota the running cell is interrupted once, for the quota",
          "[workspace_link]") {
  Rig rig;
  Cell cell = running_cell("m3");
  rig.warden.surveys.push_back(measured(1000));  // the baseline
  REQUIRE(rig.link.take_survey(rig.warden, &cell));
  SurveyReport over = measured(1000 + (64u << 20));
  over.over_quota = true;
  rig.warden.surveys.push_back(over);
  REQUIRE(rig.link.take_survey(rig.warden, &cell));
  CHECK(cell.limit_hit == LimitHit::workspace);
  CHECK(cell.kill_at.has_value());
  CHECK(rig.warden.interrupts == 1);
  rig.warden.surveys.push_back(over);
  REQUIRE(rig.link.take_survey(rig.warden, &cell));
  CHECK(rig.warden.interrupts == 1);  // not again: the cell is already being stopped
}

TEST_CASE("workspace link: a sandbox that guards no workspace holds nothing and is asked nothing",
          "[workspace_link]") {
  Rig rig;
  rig.warden.guards = false;
  json frame = {{"type", "execute"}, {"id", "r1"}};
  CHECK_FALSE(rig.link.hold(rig.warden, frame));
  CHECK(frame["id"] == "r1");  // left as it was, to be handed at once
  rig.link.schedule(rig.warden, WorkspaceLink::Clock::now() + std::chrono::hours(1));
  CHECK(rig.warden.asked.empty());
  CHECK_FALSE(rig.link.next_due(rig.warden));
}

TEST_CASE("workspace link: a cell held for its survey is not interrupted by the quota it waits on",
          "[workspace_link]") {
  Rig rig;
  Cell cell = running_cell("m4");
  rig.warden.surveys.push_back(measured(1000));  // the baseline
  REQUIRE(rig.link.take_survey(rig.warden, &cell));
  json frame = {{"type", "execute"}, {"id", "r4"}};
  REQUIRE(rig.link.hold(rig.warden, frame));
  SurveyReport over = measured(1000 + (64u << 20));
  over.over_quota = true;
  rig.warden.surveys.push_back(over);
  auto step = rig.link.take_survey(rig.warden, &cell);
  REQUIRE(step);
  CHECK(rig.warden.interrupts == 0);  // not running yet: nothing to interrupt
  CHECK(cell.limit_hit == LimitHit::none);
}
