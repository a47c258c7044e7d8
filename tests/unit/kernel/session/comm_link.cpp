// The comm link alone, through fake doors: a frontend's comm message becomes a frame (or nothing,
// naming no comm); one arriving while a cell listens is handed at once, marked `during` that cell,
// one at a time, and a large one is held with the rest; only the handed message's handler may
// begin, and its output goes under that message on the cell's budget; what the cell leaves goes
// back in order, but a handler that had begun is not served again; the worker's comm messages
// are counted against the request and refused past the cap; drops are told once per window for
// comm handlers; a handler that lost the session is told twice; comm_info lists only comms the
// page was told of.
#include "kernel/session/comm_link.hpp"

#include <catch2/catch.hpp>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

namespace {

struct Rig {
  explicit Rig(ActiveOutput mode = ActiveOutput::allow) : checks(redactor, mode) {
    cell.request = request("execute_request", "cell-1");
    cell.id = "r1";
    budget.reset(1 << 20);
  }
  FakeClient client;
  FakeWorker worker;
  Redactor redactor;
  OutputChecks checks;
  RateLimitedLog frame_log{10}, request_log{10};
  CommLink link{client, worker, checks, frame_log, request_log};
  Cell cell;
  OutputBudget budget;
  uint64_t frame_ids = 1;
};

WireMessage comm_msg(const std::string& msg_id, json data = json::object()) {
  return request("comm_msg", msg_id, {{"comm_id", "c1"}, {"data", std::move(data)}});
}

json worker_comm(const std::string& type, const std::string& comm_id = "c1") {
  json frame = {{"comm_id", comm_id}, {"data", json::object()}};
  if (type == "comm_open") frame["target_name"] = "jupyter.widget";
  return frame;
}

}  // namespace

TEST_CASE("comm link: a frontend's comm message becomes a frame, or nothing", "[comm_link]") {
  Rig rig;
  WireMessage open = request("comm_open", "m1", {{"comm_id", "c1"}, {"target_name", "t"}});
  open.buffers = {"\x01\x02\x03"};
  json frame = rig.link.request_frame(open, "r7");
  CHECK(frame["type"] == "comm");
  CHECK(frame["id"] == "r7");
  CHECK(frame["msg_type"] == "comm_open");
  CHECK(frame["msg_id"] == "m1");
  CHECK(frame["buffers"] == json::array({"AQID"}));
  CHECK(rig.checks.widgets().target_of("c1") == "t");  // the page opened it
  CHECK(rig.link.request_frame(request("comm_msg", "m2", {{"data", 1}}), "r8").is_null());
  CHECK(rig.link.request_frame(request("comm_open", "m3", {{"comm_id", "c2"}}), "r9").is_null());
  CHECK(rig.link.request_frame(request("comm_msg", "m4", json::array()), "r9").is_null());
}

TEST_CASE("comm link: taken during a cell only while it listens and no comm waits in the queue",
          "[comm_link]") {
  Rig rig;
  CHECK(rig.link.takes_during_cell(comm_msg("m1"), true, false));
  CHECK_FALSE(rig.link.takes_during_cell(comm_msg("m1"), false, false));
  CHECK_FALSE(rig.link.takes_during_cell(comm_msg("m1"), true, true));  // one came first
  CHECK_FALSE(rig.link.takes_during_cell(request("execute_request", "m2"), true, false));
  CHECK_FALSE(rig.link.takes_during_cell(request("comm_info_request", "m3"), true, false));
}

TEST_CASE("comm link: handed at once, marked during the cell, one at a time", "[comm_link]") {
  Rig rig;
  rig.link.arrive(comm_msg("m1"), rig.cell, rig.frame_ids);
  rig.link.arrive(comm_msg("m2"), rig.cell, rig.frame_ids);
  REQUIRE(rig.worker.frames.size() == 1);
  CHECK(rig.worker.frames[0]["during"] == "r1");
  CHECK(rig.worker.frames[0]["id"] == "r2");
  CHECK(rig.worker.frames[0]["msg_id"] == "m1");
  CHECK(rig.frame_ids == 2);
  // Its done before its begin is no claim the link takes: the next still waits.
  rig.link.on_handler_frame(WorkerFrame::done, {{"id", "r2"}}, rig.cell, rig.budget, rig.frame_ids);
  CHECK(rig.worker.frames.size() == 1);
  rig.link.on_begin({{"id", "r2"}}, true);
  CHECK(rig.link.handler_runs("r2"));
  rig.link.on_handler_frame(WorkerFrame::done, {{"id", "r2"}}, rig.cell, rig.budget, rig.frame_ids);
  REQUIRE(rig.worker.frames.size() == 2);
  CHECK(rig.worker.frames[1]["msg_id"] == "m2");
  CHECK(rig.worker.frames[1]["id"] == "r3");
  CHECK(rig.link.take_handled() == 1);
}

TEST_CASE("comm link: a message too large to hand during the cell waits with all after it",
          "[comm_link]") {
  Rig rig;
  rig.link.arrive(comm_msg("big", std::string(CommsDuringCell::kMaxHandedBytes, 'x')), rig.cell,
                  rig.frame_ids);
  rig.link.arrive(comm_msg("small"), rig.cell, rig.frame_ids);
  CHECK(rig.worker.frames.empty());
  std::deque<WireMessage> back = rig.link.take_back();
  REQUIRE(back.size() == 2);
  CHECK(back[0].id() == "big");
  CHECK(back[1].id() == "small");
}

TEST_CASE("comm link: a message naming no comm is dropped, the next handed", "[comm_link]") {
  Rig rig;
  rig.link.arrive(request("comm_msg", "bad", {{"data", 1}}), rig.cell, rig.frame_ids);
  rig.link.arrive(comm_msg("m2"), rig.cell, rig.frame_ids);
  REQUIRE(rig.worker.frames.size() == 1);
  CHECK(rig.worker.frames[0]["msg_id"] == "m2");
}

TEST_CASE("comm link: only the handed message's handler begins, and only in its cell",
          "[comm_link]") {
  Rig rig;
  rig.link.arrive(comm_msg("m1"), rig.cell, rig.frame_ids);
  rig.link.on_begin({{"id", "r9"}}, true);  // not the handed one
  CHECK_FALSE(rig.link.handler_runs("r9"));
  CHECK(rig.link.running() == nullptr);
  rig.link.on_begin({{"id", "r2"}}, false);  // no cell executes
  CHECK(rig.link.running() == nullptr);
  rig.link.on_begin({{"id", "r2"}, {"idle", true}}, true);  // between requests
  CHECK(rig.link.running() == nullptr);
  rig.link.on_begin({{"id", "r2"}}, true);
  REQUIRE(rig.link.running() != nullptr);
  CHECK(rig.link.running()->id() == "m1");
}

TEST_CASE("comm link: a handler's output goes under its message, charged to the cell",
          "[comm_link]") {
  Rig rig;
  rig.link.arrive(comm_msg("m1"), rig.cell, rig.frame_ids);
  rig.link.on_begin({{"id", "r2"}}, true);
  rig.link.on_handler_frame(WorkerFrame::display, {{"data", {{"text/plain", "hi"}}}}, rig.cell,
                            rig.budget, rig.frame_ids);
  rig.link.on_handler_frame(WorkerFrame::clear_output, {{"wait", false}}, rig.cell, rig.budget,
                            rig.frame_ids);
  rig.link.on_handler_frame(WorkerFrame::comm_open, worker_comm("comm_open", "w1"), rig.cell,
                            rig.budget, rig.frame_ids);
  rig.link.on_handler_frame(WorkerFrame::result, {{"data", {{"text/plain", "2"}}}}, rig.cell,
                            rig.budget, rig.frame_ids);  // no handler's to send
  REQUIRE(rig.client.sent.size() == 3);
  for (const auto& sent : rig.client.sent) CHECK(sent.parent == "m1");
  CHECK(rig.client.of("execute_result").empty());
  CHECK(rig.cell.comm_published == 1);
  CHECK(rig.budget.used() > 0);
}

TEST_CASE("comm link: what a cell leaves goes back in order, a begun handler is not served again",
          "[comm_link]") {
  SECTION("not begun: first, ahead of those not handed") {
    Rig rig;
    rig.link.arrive(comm_msg("m1"), rig.cell, rig.frame_ids);
    rig.link.arrive(comm_msg("m2"), rig.cell, rig.frame_ids);
    std::deque<WireMessage> back = rig.link.take_back();
    REQUIRE(back.size() == 2);
    CHECK(back[0].id() == "m1");
    CHECK(back[1].id() == "m2");
    CHECK(rig.link.take_back().empty());  // fresh for the next cell
  }
  SECTION("begun: ran with its cell") {
    Rig rig;
    rig.link.arrive(comm_msg("m1"), rig.cell, rig.frame_ids);
    rig.link.arrive(comm_msg("m2"), rig.cell, rig.frame_ids);
    rig.link.on_begin({{"id", "r2"}}, true);
    std::deque<WireMessage> back = rig.link.take_back();
    REQUIRE(back.size() == 1);
    CHECK(back[0].id() == "m2");
  }
}

TEST_CASE("comm link: the worker's comm messages are counted, and refused past the cap",
          "[comm_link]") {
  Rig rig;
  rig.link.publish("comm_open", worker_comm("comm_open"), &rig.cell.request, rig.cell, rig.budget);
  CHECK(rig.cell.comm_published == 1);
  CHECK(rig.client.of("comm_open").size() == 1);
  rig.link.publish("comm_msg", {{"comm_id", ""}}, &rig.cell.request, rig.cell, rig.budget);
  CHECK(rig.cell.comm_dropped == 1);
  CHECK(rig.cell.comm_first_drop == "comm_msg without a usable comm_id");
  rig.cell.comm_published = CommLink::kMessagesPerRequest;
  rig.link.publish("comm_msg", worker_comm("comm_msg"), &rig.cell.request, rig.cell, rig.budget);
  CHECK(rig.client.of("comm_msg").empty());
  CHECK(rig.cell.comm_dropped == 2);
  CHECK(rig.cell.comm_first_drop == "comm_msg without a usable comm_id");  // the first is told
}

TEST_CASE("comm link: drops are told each cell, and once a window for comm handlers",
          "[comm_link]") {
  Rig rig;
  rig.link.tell_drops(rig.cell);
  CHECK(rig.client.sent.empty());  // nothing withheld: nothing said
  rig.cell.comm_dropped = 2;
  rig.cell.comm_first_drop = "why";
  rig.link.tell_drops(rig.cell);
  rig.link.tell_drops(rig.cell);
  CHECK(rig.client.of("stream").size() == 2);
  Cell handler;
  handler.kind = RequestKind::comm;
  handler.request = comm_msg("h1");
  handler.comm_dropped = 1;
  handler.limit_hit = LimitHit::timeout;
  rig.link.handler_finished(handler, rig.budget);
  rig.link.handler_finished(handler, rig.budget);
  auto streams = rig.client.of("stream");
  REQUIRE(streams.size() == 5);  // the drop told once; each limit notice
  CHECK(streams[2].content["text"].get<std::string>().find("1 comm message(s)") !=
        std::string::npos);
  CHECK(streams[3].content["text"].get<std::string>().find("limit") != std::string::npos);
  CHECK(streams[4].content["text"].get<std::string>().find("limit") != std::string::npos);
}

TEST_CASE("comm link: a handler that lost the session is told on its stderr and at the next cell",
          "[comm_link]") {
  Rig rig;
  WireMessage handler = comm_msg("h1");
  rig.link.tell_session_lost_by_handler("MemoryError: out", handler);
  REQUIRE(rig.client.of("stream").size() == 1);
  CHECK(rig.client.of("stream")[0].parent == "h1");
  rig.link.tell_session_lost(rig.cell.request);
  REQUIRE(rig.client.of("stream").size() == 2);
  CHECK(rig.client.of("stream")[1].parent == "cell-1");
  CHECK(rig.client.of("stream")[1].content["text"].get<std::string>().find("MemoryError") !=
        std::string::npos);
  rig.link.tell_session_lost(rig.cell.request);  // once
  CHECK(rig.client.of("stream").size() == 2);
}

TEST_CASE("comm link: comm_info lists only comms the page was told of, unless allowed",
          "[comm_link]") {
  json frame = {
      {"comms",
       {{"c1", {{"target_name", "jupyter.widget"}}}, {"c2", {{"target_name", "jupyter.widget"}}}}}};
  Rig isolated(ActiveOutput::isolate);
  isolated.link.request_frame(
      request("comm_open", "m1", {{"comm_id", "c1"}, {"target_name", "jupyter.widget"}}), "r2");
  json listed = isolated.link.info(frame)["comms"];
  CHECK(listed.contains("c1"));
  CHECK_FALSE(listed.contains("c2"));
  Rig allowed(ActiveOutput::allow);
  CHECK(allowed.link.info(frame)["comms"].size() == 2);
}
