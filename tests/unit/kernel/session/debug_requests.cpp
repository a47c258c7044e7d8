// The debugger's requests as the supervisor tracks them: only its own pending ids are answered,
// each once, within a deadline; a reply must be a DAP response to that request; events pass only
// while a debug session is started, at a bounded rate; paused time is credited up to the
// allowance (docs/design/debugger.md §3, §4).
#include "kernel/session/debug_requests.hpp"

#include <catch2/catch.hpp>

using namespace belljar;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {
WireMessage debug_request(const std::string& command, int seq, json arguments = json::object()) {
  WireMessage message;
  message.header = {{"msg_id", "m" + std::to_string(seq)}, {"msg_type", "debug_request"}};
  message.content = {
      {"type", "request"}, {"seq", seq}, {"command", command}, {"arguments", arguments}};
  return message;
}

json response(const std::string& command, int seq, bool success = true) {
  return {{"type", "response"}, {"seq", 1},           {"request_seq", seq},
          {"success", success}, {"command", command}, {"body", json::object()}};
}

// Requests of a started debug session: initialize answered with success.
DebugRequests started_session(DebugRequests::Clock::time_point now) {
  DebugRequests requests;
  requests.add(debug_request("initialize", 1), now);
  requests.note_answer(*requests.take(1), response("initialize", 1));
  return requests;
}
}  // namespace

TEST_CASE("commands outside the allowlist and contents of no shape are refused before the worker",
          "[debug_requests]") {
  CHECK_FALSE(debug_request_problem(debug_request("stackTrace", 1).content));
  CHECK_FALSE(debug_request_problem(debug_request("richInspectVariables", 1).content));
  auto launch = debug_request_problem(debug_request("launch", 1).content);
  REQUIRE(launch);
  CHECK(launch->find("\"launch\"") != std::string::npos);
  for (const char* command : {"terminate", "restart", "runInTerminal", "pydevdSystemInfo", ""})
    CHECK(debug_request_problem(debug_request(command, 1).content));
  CHECK(debug_request_problem(json::array()));
  CHECK(debug_request_problem(json{{"seq", 3}}));
  CHECK(debug_request_problem(json{{"command", 7}}));

  // The refusal is a DAP response to what was asked, whatever its shape.
  json refusal = debug_refusal(debug_request("launch", 7).content, "no");
  CHECK(refusal == json{{"type", "response"},
                        {"request_seq", 7},
                        {"success", false},
                        {"command", "launch"},
                        {"message", "no"}});
  CHECK(debug_refusal(json("text"), "no")["request_seq"] == 0);
  CHECK(debug_refusal(json("text"), "no")["command"] == "");
}

TEST_CASE("only ids the supervisor issued are answered, each once", "[debug_requests]") {
  DebugRequests requests;
  DebugRequests::Clock::time_point now{};
  uint64_t a = requests.add(debug_request("debugInfo", 1), now);
  uint64_t b = requests.add(debug_request("threads", 2), now);
  CHECK(a != b);
  CHECK_FALSE(requests.take(b + 1));  // never issued
  auto taken = requests.take(a);
  REQUIRE(taken);
  CHECK(taken->command == "debugInfo");
  CHECK(taken->request_seq == 1);
  CHECK(taken->request.id() == "m1");
  CHECK_FALSE(requests.take(a));  // answered already
  CHECK(requests.pending() == 1);
  // Ids are never reused, so a late reply to an answered request can't land on a new one.
  CHECK(requests.add(debug_request("debugInfo", 3), now) > b);
}

TEST_CASE("at most 32 requests wait for the worker", "[debug_requests]") {
  DebugRequests requests;
  DebugRequests::Clock::time_point now{};
  for (size_t i = 0; i < DebugRequests::kMaxPending; ++i) {
    CHECK_FALSE(requests.full());
    requests.add(debug_request("threads", static_cast<int>(i)), now);
  }
  CHECK(requests.full());
}

TEST_CASE("a request the worker leaves unanswered expires at its deadline", "[debug_requests]") {
  DebugRequests requests;
  DebugRequests::Clock::time_point now{};
  uint64_t info = requests.add(debug_request("debugInfo", 1), now);
  requests.add(debug_request("initialize", 2), now);  // debugpy loads: a longer deadline
  CHECK(requests.next_deadline() == now + 30s);
  CHECK(requests.take_expired(now + 29s).empty());
  auto expired = requests.take_expired(now + 30s);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].command == "debugInfo");
  CHECK_FALSE(requests.take(info));  // a late reply to it is dropped
  CHECK(requests.next_deadline() == now + 60s);
  CHECK(requests.take_expired(now + 60s).size() == 1);
  CHECK_FALSE(requests.next_deadline());
}

TEST_CASE("a reply must be a DAP response to the very request", "[debug_requests]") {
  DebugRequests requests;
  DebugRequests::Clock::time_point now{};
  requests.add(debug_request("stackTrace", 5), now);
  auto pending = requests.take(1);
  REQUIRE(pending);
  CHECK(requests.check_reply(*pending, response("stackTrace", 5)) == response("stackTrace", 5));
  CHECK(requests.check_reply(*pending, response("stackTrace", 5, false))["success"] == false);
  json malformed[] = {
      json(),
      json("a string"),
      response("scopes", 5),      // another command
      response("stackTrace", 6),  // another request's seq
      json{{"type", "event"}, {"request_seq", 5}, {"success", true}, {"command", "stackTrace"}},
      json{{"type", "response"}, {"request_seq", 5}, {"command", "stackTrace"}},  // no success
      json{{"type", "response"}, {"request_seq", 5}, {"success", 1}, {"command", "stackTrace"}},
  };
  for (const json& reply : malformed) {
    json checked = requests.check_reply(*pending, reply);
    CHECK(checked["success"] == false);
    CHECK(checked["command"] == "stackTrace");
    CHECK(checked["request_seq"] == 5);
    CHECK(checked["message"] == "the kernel's debugger gave a malformed answer");
  }
}

TEST_CASE("a debug session is started by a successful initialize and ended by disconnect",
          "[debug_requests]") {
  DebugRequests requests;
  DebugRequests::Clock::time_point now{};
  requests.add(debug_request("initialize", 1), now);
  auto failed = requests.take(1);
  requests.note_answer(*failed, response("initialize", 1, false));
  CHECK_FALSE(requests.started());
  CHECK_FALSE(requests.admit_event("stopped", now));  // no session: nothing relayed

  requests.add(debug_request("initialize", 2), now);
  requests.note_answer(*requests.take(2), response("initialize", 2));
  CHECK(requests.started());
  CHECK(requests.admit_event("initialized", now));
  requests.set_paused(true);
  CHECK(requests.paused());

  requests.add(debug_request("disconnect", 3), now);
  requests.note_answer(*requests.take(3), response("disconnect", 3));
  CHECK_FALSE(requests.started());
  CHECK_FALSE(requests.paused());
  requests.set_paused(true);  // the worker's word counts only in a started session
  CHECK_FALSE(requests.paused());
}

TEST_CASE("the worker's exit answers every pending request and clears the session",
          "[debug_requests]") {
  DebugRequests::Clock::time_point now{};
  DebugRequests requests = started_session(now);
  requests.set_paused(true);
  requests.add(debug_request("stackTrace", 2), now);
  requests.add(debug_request("scopes", 3), now);
  auto all = requests.take_all();
  REQUIRE(all.size() == 2);
  CHECK(all[0].command == "stackTrace");
  CHECK(all[1].command == "scopes");
  CHECK(requests.pending() == 0);
  CHECK_FALSE(requests.started());
  CHECK_FALSE(requests.paused());
}

TEST_CASE("past the event rate only the events the frontend's state hangs on pass",
          "[debug_requests]") {
  DebugRequests::Clock::time_point now{};
  DebugRequests requests = started_session(now);
  for (uint64_t i = 0; i < DebugRequests::kEventsPerWindow; ++i)
    REQUIRE(requests.admit_event("output", now));
  for (const char* event : {"output", "thread", "module"})
    CHECK_FALSE(requests.admit_event(event, now + 1s));
  for (const char* event : {"stopped", "continued", "initialized", "exited", "terminated"})
    CHECK(requests.admit_event(event, now + 1s));
  CHECK(requests.events_dropped() == 3);
  CHECK(requests.admit_event("output", now + 60s));  // a new window
}

TEST_CASE("requests that run code are found for the audit log", "[debug_requests]") {
  CHECK(code_in_debug_request(
            debug_request("evaluate", 1, {{"expression", "x + 1"}, {"context", "repl"}}).content) ==
        "x + 1");
  CHECK(code_in_debug_request(
            debug_request("setExpression", 1, {{"expression", "a"}, {"value", "2"}}).content) ==
        "a = 2");
  CHECK(code_in_debug_request(
            debug_request("setVariable", 1, {{"name", "b"}, {"value", "3"}}).content) == "b = 3");
  CHECK(code_in_debug_request(
            debug_request("copyToGlobals", 1, {{"srcVariableName", "y"}, {"dstVariableName", "z"}})
                .content) == "globals()[\"z\"] = y");
  json plain = {{"breakpoints", {{{"line", 2}}}}, {"source", {{"path", "/tmp/x.py"}}}};
  CHECK_FALSE(code_in_debug_request(debug_request("setBreakpoints", 1, plain).content));
  json conditional = {{"breakpoints", {{{"line", 2}}, {{"line", 4}, {"condition", "x > 3"}}}}};
  auto code = code_in_debug_request(debug_request("setBreakpoints", 1, conditional).content);
  REQUIRE(code);
  CHECK(code->find("x > 3") != std::string::npos);
  json logged = {{"breakpoints", {{{"line", 2}, {"logMessage", "{secret}"}}}}};
  CHECK(code_in_debug_request(debug_request("setBreakpoints", 1, logged).content));
  for (const char* command : {"stackTrace", "variables", "continue", "inspectVariables"})
    CHECK_FALSE(code_in_debug_request(debug_request(command, 1).content));
}

TEST_CASE("paused time is not counted by the timeout, up to the allowance", "[debug_requests]") {
  PausedTime paused;
  PausedTime::Clock::time_point start{};
  const double timeout = 10, allowance = 30;
  // Never paused: the deadline is the timeout.
  CHECK(paused.deadline(start, timeout, allowance, start + 4s) == start + 10s);

  paused.pause(start + 4s);  // 4 s of running, then a breakpoint
  CHECK(paused.credited(start + 14s, allowance) == Approx(10));
  // While paused under the allowance the deadline moves with the clock: at 14 s it is the
  // allowance that is left (20 s) plus the running time that is left (6 s) away.
  CHECK(paused.deadline(start, timeout, allowance, start + 14s) == start + 40s);
  paused.pause(start + 20s);   // said twice: the first pause stands
  paused.resume(start + 24s);  // 20 s paused
  CHECK_FALSE(paused.paused());
  CHECK(paused.total(start + 24s) == Approx(20));
  CHECK(paused.deadline(start, timeout, allowance, start + 24s) == start + 30s);

  // A second pause runs past the allowance: from then on the clock counts again.
  paused.pause(start + 25s);
  CHECK(paused.credited(start + 35s, allowance) == Approx(30));
  CHECK(paused.credited(start + 100s, allowance) == Approx(30));
  CHECK(paused.deadline(start, timeout, allowance, start + 35s) == start + 40s);
  CHECK(paused.deadline(start, timeout, allowance, start + 50s) == start + 50s);  // due now

  // No allowance (--debug-pause 0): paused time counts as running time.
  PausedTime none;
  none.pause(start);
  CHECK(none.credited(start + 5s, 0) == 0);
  CHECK(none.deadline(start, timeout, 0, start + 5s) == start + 10s);
}

TEST_CASE("a pause during which the session burns CPU is not believed", "[debug_requests]") {
  PausedTime paused;
  PausedTime::Clock::time_point start{};
  const double timeout = 10, allowance = 3600;
  paused.sample_cpu(1.0);  // the session's CPU as the cell starts
  paused.pause(start + 1s);
  // The debugger answering the client while stopped: well under the allowance.
  paused.sample_cpu(1.2);
  CHECK_FALSE(paused.forfeit_if_busy(start + 5s));
  CHECK(paused.credited(start + 5s, allowance) == Approx(4));
  // A busy loop under a claimed pause: a second of CPU in a second of pause.
  paused.sample_cpu(2.2);
  CHECK(paused.forfeit_if_busy(start + 6s));
  CHECK_FALSE(paused.forfeit_if_busy(start + 6s));  // said once
  CHECK(paused.forfeited());
  CHECK(paused.cpu_while_paused() == Approx(1.2));
  // Nothing is credited any more, and a pause claimed again is ignored for the cell.
  CHECK(paused.credited(start + 6s, allowance) == 0);
  paused.pause(start + 7s);
  CHECK_FALSE(paused.paused());
  CHECK(paused.deadline(start, timeout, allowance, start + 7s) == start + 10s);
}

TEST_CASE("CPU spent while running is never charged to a pause", "[debug_requests]") {
  PausedTime paused;
  PausedTime::Clock::time_point start{};
  paused.sample_cpu(0);
  paused.sample_cpu(8);  // eight seconds of CPU, running
  paused.pause(start + 9s);
  paused.sample_cpu(8.1);
  paused.resume(start + 20s);
  paused.sample_cpu(30);  // running again
  CHECK_FALSE(paused.forfeit_if_busy(start + 40s));
  CHECK(paused.cpu_while_paused() == Approx(0.1));
  CHECK(paused.credited(start + 40s, 3600) == Approx(11));
}
