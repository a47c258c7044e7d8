// Which frame answers which request: the comm messages join the shell requests; every frame a
// worker sends is parsed in one table.
#include "kernel/session/request_kind.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <string_view>

using namespace belljar;

TEST_CASE("the three comm messages are one request kind, answered by done", "[request_kind]") {
  for (const char* type : {"comm_open", "comm_msg", "comm_close"}) {
    REQUIRE(request_kind(type) == RequestKind::comm);
  }
  CHECK(worker_request(RequestKind::comm) == "comm");
  CHECK(worker_answer(RequestKind::comm) == WorkerFrame::done);
  CHECK(request_kind("comm_info_request") == RequestKind::comm_info);
  CHECK(worker_answer(RequestKind::comm_info) == WorkerFrame::comm_info_reply);
  CHECK(request_kind("execute_request") == RequestKind::execute);
  CHECK_FALSE(request_kind("kernel_info_request"));
  CHECK_FALSE(request_kind("comm_info_reply"));
}

TEST_CASE("every frame a worker sends is parsed in one table, and nothing else is",
          "[request_kind]") {
  for (size_t i = 0; i < kWorkerFrameTypes; ++i) {
    auto frame = static_cast<WorkerFrame>(i);
    CHECK(worker_frame(worker_frame_name(frame)) == frame);
  }
  CHECK(worker_frame("display") == WorkerFrame::display);
  CHECK(worker_frame("comm_info_reply") == WorkerFrame::comm_info_reply);
  for (const char* unknown : {"", "Display", "display ", "execute", "execute_reply", "status"})
    CHECK_FALSE(worker_frame(unknown));
  CHECK(worker_frame_name(worker_answer(RequestKind::inspect)) == "inspect_reply");
}

TEST_CASE("between requests a worker may send output, never a request's answer or question",
          "[request_kind]") {
  for (const char* shown :
       {"display", "update_display", "clear_output", "comm_open", "comm_msg", "comm_close"})
    CHECK(idle_output(*worker_frame(shown)));
  // A result, an error or a done ends or fails a cell; a question waits for an answer no
  // request asked for; a reply answers a request: none of them has a meaning between requests.
  for (const char* refused :
       {"hello", "result", "error", "input_request", "limits", "audit_request", "comm_begin",
        "done", "complete_reply", "inspect_reply", "is_complete_reply", "comm_info_reply"})
    CHECK_FALSE(idle_output(*worker_frame(refused)));
}

TEST_CASE("only output may name an earlier request as its parent", "[request_kind]") {
  for (const char* output : {"display", "update_display", "clear_output", "stream"})
    CHECK(names_a_parent(*worker_frame(output)));
  // A comm message is the widget's, a result or an error the running cell's, a done or a
  // reply ends a request: none of them may be steered to another.
  for (const char* other : {"result", "error", "comm_msg", "done", "input_request", "hello"})
    CHECK_FALSE(names_a_parent(*worker_frame(other)));
}

TEST_CASE("every frame a worker sends is charged to a budget, or reaches no client",
          "[request_kind]") {
  // The complement of the budgets, written out: a frame added to the table with `nothing` (or
  // `fixed`) fails here until it is added below, with its reason.
  const std::set<std::string_view> reach_no_client = {
      "limits",              // answered to the worker (limits_reply)
      "audit_request",       // answered to the worker (audit_reply)
      "checkpoint_request",  // answered to the worker (checkpoint_reply)
      "comm_begin",          // marks the start of a comm handler during a cell
      "debug_state",         // moves the cell's pause, nothing else
  };
  const std::set<std::string_view> fixed = {"hello"};  // language_info rebuilt by the kernel
  const std::set<std::string_view> own_reply_budget = {"complete_reply", "inspect_reply",
                                                       "is_complete_reply", "comm_info_reply"};
  size_t seen = 0;
  for (size_t i = 0; i < kWorkerFrameTypes; ++i) {
    auto frame = static_cast<WorkerFrame>(i);
    std::string_view name = worker_frame_name(frame);
    INFO(name);
    REQUIRE_FALSE(name.empty());
    switch (frame_charge(frame)) {
      case FrameCharge::nothing:
        CHECK(reach_no_client.count(name) == 1);
        break;
      case FrameCharge::fixed:
        CHECK(fixed.count(name) == 1);
        break;
      case FrameCharge::reply_budget:
        CHECK(own_reply_budget.count(name) == 1);
        break;
      case FrameCharge::output_budget:
        CHECK(reach_no_client.count(name) + fixed.count(name) + own_reply_budget.count(name) == 0);
        break;
      default:
        FAIL("a frame with no budget");
    }
    ++seen;
  }
  CHECK(seen == kWorkerFrameTypes);
  // The debugger's replies and events, displays, streams and comms: the output budget, no
  // exemption.
  for (const char* charged :
       {"debug_reply", "debug_event", "display", "update_display", "stream", "comm_open",
        "comm_msg", "comm_close", "error", "done", "result", "clear_output", "input_request"})
    CHECK(frame_charge(*worker_frame(charged)) == FrameCharge::output_budget);
}
