// One starter per request kind, alone, through fake doors: every kind has a starter, whose frame
// is that kind's, under the request's id; a cell takes the next execution count unless silent,
// its budget reset, its code echoed redacted (not for a silent cell), its timeout only tightened
// by the client; a comm message without a comm_id does not start (told idle); a lookup's fields
// of the wrong type take their defaults.
#include "kernel/session/request_starters.hpp"

#include <catch2/catch.hpp>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

namespace {

struct Rig {
  Policy policy;
  FakeClient client;
  FakeWorker worker;
  Redactor redactor{std::vector<std::string>{kSecret}};
  OutputChecks checks{redactor, ActiveOutput::isolate};
  RateLimitedLog frame_log{10}, request_log{10};
  CommLink comms{client, worker, checks, frame_log, request_log};
  StarterDoors doors{client, comms, request_log, redactor, policy};
  CurrentRequest current;

  // The frame `message` starts with, its Cell left in `cell`.
  json start(const WireMessage& message, double cpu_now = 2, double background = 0.5) {
    cell = Cell();
    cell.request = message;
    cell.kind = *request_kind(message.type());
    cell.id = current.fresh_id();
    cell.started = Cell::Clock::now();
    RequestStart start{message, cell, current, cpu_now, background, false};
    return start_request_frame(doors, start);
  }
  Cell cell;
};

}  // namespace

TEST_CASE("request starters: every kind has one, and its frame is the kind's",
          "[request_starters]") {
  Rig rig;
  for (size_t i = 0; i < kRequestKinds; ++i) {
    auto kind = static_cast<RequestKind>(i);
    INFO("kind " << request_type(kind));
    REQUIRE(request_starter(kind) != nullptr);
    json content = {{"code", "x"}, {"comm_id", "c1"}, {"data", json::object()}};
    json frame =
        rig.start(request(std::string(request_type(kind)), "m" + std::to_string(i), content));
    CHECK(frame["type"] == worker_request(kind));
    CHECK(frame["id"] == rig.cell.id);
  }
}

TEST_CASE("request starters: a cell takes its count, its budget, and is echoed redacted",
          "[request_starters]") {
  Rig rig;
  rig.current.budget().take(100);
  json frame = rig.start(request("execute_request", "cell",
                                 {{"code", "key = '" + kSecret + "'"},
                                  {"user_expressions", {{"a", "1"}}},
                                  {"allow_stdin", false}}));
  CHECK(frame["execution_count"] == 1);
  CHECK(frame["msg_id"] == "cell");
  CHECK(frame["code"] == "key = '" + kSecret + "'");  // the worker runs what was sent
  CHECK(frame["allow_stdin"] == false);
  CHECK(frame["silent"] == false);
  CHECK(frame["store_history"] == true);
  CHECK(frame["user_expressions"] == json({{"a", "1"}}));
  CHECK(rig.cell.expressions_asked == json({{"a", "1"}}));
  CHECK(rig.current.budget().used() == 0);
  CHECK(rig.current.budget().limit() == rig.policy.output_limit_bytes);
  CHECK(rig.cell.cpu_at_start == 1.5);  // the background CPU is the cell's
  CHECK(rig.cell.background_cpu == 0.5);
  auto echo = rig.client.of("execute_input");
  REQUIRE(echo.size() == 1);
  CHECK(echo[0].parent == "cell");
  CHECK(echo[0].content["execution_count"] == 1);
  CHECK(echo[0].content["code"].get<std::string>().find(kSecret) == std::string::npos);
}

TEST_CASE("request starters: a silent cell takes no count, stores no history, is not echoed",
          "[request_starters]") {
  Rig rig;
  rig.start(request("execute_request", "first", {{"code", "1"}}));
  json frame = rig.start(request("execute_request", "quiet", {{"code", "2"}, {"silent", true}}));
  CHECK(frame["execution_count"] == 1);
  CHECK(frame["silent"] == true);
  CHECK(frame["store_history"] == false);
  CHECK(rig.client.of("execute_input").size() == 1);
}

TEST_CASE("request starters: a client's timeout only tightens the policy", "[request_starters]") {
  Rig rig;
  rig.policy.timeout_seconds = 30;
  WireMessage shorter = request("execute_request", "a", {{"code", "1"}});
  shorter.metadata = {{"belljar", {{"timeout_seconds", 5}}}};
  rig.start(shorter);
  CHECK(rig.cell.timeout == 5);
  WireMessage longer = request("execute_request", "b", {{"code", "1"}});
  longer.metadata = {{"belljar", {{"timeout_seconds", 300}}}};
  rig.start(longer);
  CHECK(rig.cell.timeout == 30);
}

TEST_CASE("request starters: a comm message without a comm_id does not start",
          "[request_starters]") {
  Rig rig;
  json frame = rig.start(request("comm_msg", "bad", {{"data", json::object()}}));
  CHECK(frame.is_null());
  auto told = rig.client.of("status");
  REQUIRE(told.size() == 1);
  CHECK(told[0].content["execution_state"] == "idle");
  CHECK(told[0].parent == "bad");
  // Its id was spent all the same.
  CHECK(rig.current.fresh_id() == "r2");

  json handler = rig.start(request("comm_msg", "good", {{"comm_id", "c1"}, {"data", 1}}));
  CHECK(handler["type"] == "comm");
  CHECK(rig.cell.timeout == rig.policy.timeout_seconds);
  CHECK(rig.cell.cpu_at_start == 2);  // no background CPU is a handler's
}

TEST_CASE("request starters: a lookup's fields of the wrong type take their defaults",
          "[request_starters]") {
  Rig rig;
  json complete = rig.start(request("complete_request", "c", {{"code", "abc"}}));
  CHECK(complete["cursor_pos"] == 3);
  CHECK(complete["detail_level"] == 0);
  json inspect = rig.start(
      request("inspect_request", "i", {{"code", 5}, {"cursor_pos", "1"}, {"detail_level", 1}}));
  CHECK(inspect["code"] == "");
  CHECK(inspect["cursor_pos"] == 0);
  CHECK(inspect["detail_level"] == 1);
  json info = rig.start(request("comm_info_request", "n", {{"target_name", 7}}));
  CHECK_FALSE(info.contains("target_name"));
  info = rig.start(request("comm_info_request", "n2", {{"target_name", "jupyter.widget"}}));
  CHECK(info["target_name"] == "jupyter.widget");
  CHECK(rig.client.sent.empty());  // a lookup is not echoed
}
