// The debugger link alone, on fake doors and a fake core, its debug channel a real socketpair
// whose far end plays the worker: one case per rule of debug_link.hpp. Requests are served one
// at a time and those before hello wait for it (or the reason there is none); what the worker
// cannot take is refused in DAP's shape; code-running requests are audited first and refused
// under --audit-required while the log fails; replies and events are redacted and charged, an
// essential event past the budget ending the session; a worker leaving requests unread is at
// fault; the channel's EOF is no fault, and what is pending is answered after the grace.
#include "kernel/session/debug_link.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "kernel/session/fake_doors.hpp"
#include "sandbox/os/fd.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

namespace {

constexpr const char* kDebugSecret = "sk-debug-0123456789abcdef";

class FakeCore final : public DebugCore {
 public:
  FakeCore() { budget.reset(1 << 20); }
  OutputBudget& output_budget() override { return budget; }
  const WireMessage* output_parent() const override { return running ? &*running : nullptr; }
  const WireMessage* background_parent() const override { return nullptr; }
  std::optional<int> execution_count() const override { return count; }
  void note_pause(bool paused, Clock::time_point) override { pauses.push_back(paused); }
  void end_pause(Clock::time_point) override { ++pauses_ended; }
  void read_output_before(const json&) override { ++output_reads; }

  OutputBudget budget;
  std::optional<WireMessage> running;
  std::optional<int> count;
  std::vector<bool> pauses;
  int pauses_ended = 0, output_reads = 0;
};

json dap(const std::string& command, int seq, json arguments = json::object()) {
  return {{"type", "request"}, {"seq", seq}, {"command", command}, {"arguments", arguments}};
}

json response(const std::string& command, int seq, json body = json::object()) {
  return {{"type", "response"}, {"seq", 1},           {"request_seq", seq},
          {"success", true},    {"command", command}, {"body", std::move(body)}};
}

json event(const std::string& name, json body = json::object()) {
  return {{"type", "event"}, {"seq", 1}, {"event", name}, {"body", std::move(body)}};
}

struct Rig {
  explicit Rig(DebugLink::AuditPolicy policy = {})
      : link(client, audit, worker, checks, log, policy, core) {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
    ours = Fd(fds[0]);
    theirs = Fd(fds[1]);
  }
  // A worker started, its hello said (with or without a debugger).
  void start(bool debugger = true) {
    link.new_worker();
    link.readiness(false, "");
    link.attach(ours.get());
    link.hello(debugger);
    link.readiness(true, "");
  }
  // The frames the link wrote to the worker's end since the last call.
  std::vector<json> to_worker() {
    char chunk[65536];
    ssize_t n;
    while ((n = ::read(theirs.get(), chunk, sizeof chunk)) > 0)
      decoder.feed(std::string_view(chunk, static_cast<size_t>(n)));
    std::vector<json> frames;
    while (auto frame = decoder.next()) frames.push_back(std::move(*frame));
    return frames;
  }
  // The worker writes `frame` on fd 4; the reactor reads it.
  void from_worker(const json& frame) {
    std::string bytes = encode_worker_frame(frame);
    REQUIRE(::write(theirs.get(), bytes.data(), bytes.size()) ==
            static_cast<ssize_t>(bytes.size()));
    link.read();
  }
  // The worker answers the request it was last handed with `content`.
  void answer_last(const json& content) {
    from_worker({{"type", "debug_reply"}, {"id", link.last_id()}, {"content", content}});
  }
  // initialize asked and answered: a debug session is started.
  void start_session() {
    link.serve(request("debug_request", "init", dap("initialize", 1)));
    answer_last(response("initialize", 1));
  }
  std::vector<Sent> replies() const { return client.of("debug_reply"); }

  FakeClient client;
  FakeAudit audit;
  FakeWorker worker;
  Redactor redactor{{kDebugSecret}};
  OutputChecks checks{redactor, ActiveOutput::isolate};
  RateLimitedLog log{10};
  FakeCore core;
  DebugLink link;
  Fd ours, theirs;
  WorkerFrameDecoder decoder;
};

}  // namespace

TEST_CASE("debug link: requests are served one at a time, in the order they came", "[debug_link]") {
  Rig rig;
  rig.start();
  rig.link.serve(request("debug_request", "a", dap("initialize", 1)));
  rig.link.serve(request("debug_request", "b", dap("threads", 2)));
  auto frames = rig.to_worker();
  REQUIRE(frames.size() == 1);  // b waits for a's reply
  CHECK(frames[0]["type"] == "debug_request");
  CHECK(frames[0]["content"]["command"] == "initialize");
  rig.answer_last(response("initialize", 1));
  frames = rig.to_worker();
  REQUIRE(frames.size() == 1);
  CHECK(frames[0]["content"]["command"] == "threads");
  rig.answer_last(response("threads", 2));
  // Each request's busy, reply and idle before the next one's busy.
  std::vector<std::string> seen;
  for (const auto& sent : rig.client.sent)
    seen.push_back(sent.type == "status"
                       ? sent.content["execution_state"].get<std::string>() + " " + sent.parent
                       : sent.type + " " + sent.parent);
  CHECK(seen == std::vector<std::string>{"busy a", "debug_reply a", "idle a", "busy b",
                                         "debug_reply b", "idle b"});
  CHECK(rig.replies()[1].content["success"] == true);
  CHECK(rig.worker.faults.empty());
}

TEST_CASE("debug link: requests before hello wait for it, or for the reason there is none",
          "[debug_link]") {
  Rig rig;
  rig.link.new_worker();
  rig.link.readiness(false, "");
  rig.link.serve(request("debug_request", "early", dap("initialize", 1)));
  CHECK(rig.client.sent.empty());
  auto held = rig.link.take_held();
  REQUIRE(held.size() == 1);
  CHECK(held[0].id() == "early");

  // No worker can be started: refused, with the reason.
  rig.link.readiness(false, "the sandbox could not be started: no");
  rig.link.serve(request("debug_request", "late", dap("initialize", 2)));
  REQUIRE(rig.replies().size() == 1);
  CHECK(rig.replies()[0].content["success"] == false);
  CHECK(rig.replies()[0].content["message"].get<std::string>().find("could not be started") !=
        std::string::npos);
  CHECK(rig.link.take_held().empty());
}

TEST_CASE("debug link: what the worker cannot take is refused by the link, in DAP's shape",
          "[debug_link]") {
  SECTION("a command outside the allowlist") {
    Rig rig;
    rig.start();
    rig.link.serve(request("debug_request", "x", dap("launch", 4)));
    REQUIRE(rig.replies().size() == 1);
    CHECK(rig.replies()[0].content["request_seq"] == 4);
    CHECK(rig.replies()[0].content["success"] == false);
    CHECK(rig.to_worker().empty());
  }
  SECTION("a worker with no debugpy") {
    Rig rig;
    rig.start(false);
    rig.link.serve(request("debug_request", "x", dap("initialize", 1)));
    REQUIRE(rig.replies().size() == 1);
    CHECK(rig.replies()[0].content["message"].get<std::string>().find("no debugpy") !=
          std::string::npos);
    CHECK(rig.to_worker().empty());
  }
  SECTION("the channel closed") {
    Rig rig;
    rig.start();
    rig.link.worker_gone();
    rig.link.serve(request("debug_request", "x", dap("initialize", 1)));
    REQUIRE(rig.replies().size() == 1);
    CHECK(rig.replies()[0].content["message"].get<std::string>().find("channel closed") !=
          std::string::npos);
  }
  SECTION("a reply for an id the link never issued is dropped") {
    Rig rig;
    rig.start();
    rig.from_worker({{"type", "debug_reply"}, {"id", 99}, {"content", response("threads", 1)}});
    CHECK(rig.client.sent.empty());
  }
}

TEST_CASE(
    "debug link: a request that runs code is audited first, and refused while the audit "
    "log fails under --audit-required",
    "[debug_link]") {
  SECTION("audited, naming the cell") {
    Rig rig({false, true});
    rig.start();
    rig.core.count = 7;
    rig.link.serve(request("debug_request", "e", dap("evaluate", 3, {{"expression", "1+1"}})));
    auto records = rig.audit.of("debug_code");
    REQUIRE(records.size() == 1);
    CHECK(records[0]["execution_count"] == 7);
    CHECK(records[0]["command"] == "evaluate");
    CHECK(records[0]["code"] == "1+1");  // --audit-code
    CHECK(rig.to_worker().size() == 1);
  }
  SECTION("refused") {
    Rig rig({true, false});
    rig.start();
    rig.audit.failing = true;
    rig.link.serve(request("debug_request", "e", dap("evaluate", 3, {{"expression", "1+1"}})));
    REQUIRE(rig.replies().size() == 1);
    CHECK(rig.replies()[0].content["success"] == false);
    CHECK(rig.replies()[0].content["message"].get<std::string>().find("--audit-required") !=
          std::string::npos);
    CHECK(rig.to_worker().empty());
  }
}

TEST_CASE("debug link: replies and events are redacted and charged to the output budget",
          "[debug_link]") {
  Rig rig;
  rig.start();
  rig.start_session();
  rig.link.serve(request("debug_request", "v", dap("variables", 2)));
  rig.answer_last(response("variables", 2, {{"variables", {{{"value", kDebugSecret}}}}}));
  REQUIRE(rig.replies().size() == 2);
  CHECK(rig.replies()[1].content.dump().find(kDebugSecret) == std::string::npos);
  CHECK(rig.core.budget.used() > 0);
  CHECK(rig.core.output_reads > 0);  // the pipes' text before each frame

  rig.from_worker(
      {{"type", "debug_event"}, {"content", event("output", {{"output", kDebugSecret}})}});
  auto events = rig.client.of("debug_event");
  REQUIRE(events.size() == 1);
  CHECK(events[0].parent == "v");  // under the last debug request
  CHECK(events[0].content.dump().find(kDebugSecret) == std::string::npos);

  // Past the budget: a reply becomes a refusal, an event is dropped.
  rig.core.budget.reset(10);  // a fresh budget, too small for either
  rig.link.serve(request("debug_request", "w", dap("variables", 3)));
  rig.answer_last(response("variables", 3, {{"variables", json::array()}}));
  REQUIRE(rig.replies().size() == 3);
  CHECK(rig.replies()[2].content["success"] == false);
  CHECK(rig.replies()[2].content["message"].get<std::string>().find("--output-limit") !=
        std::string::npos);
  rig.from_worker({{"type", "debug_event"}, {"content", event("output", {{"output", "x"}})}});
  CHECK(rig.client.of("debug_event").size() == 1);
}

TEST_CASE("debug link: an essential event past the budget ends the session, with a notice",
          "[debug_link]") {
  Rig rig;
  rig.start();
  rig.start_session();
  rig.core.budget.reset(0);
  rig.from_worker({{"type", "debug_event"}, {"content", event("stopped")}});
  auto events = rig.client.of("debug_event");
  REQUIRE(events.size() == 1);  // the link's own, of a fixed shape
  CHECK(events[0].content["event"] == "terminated");
  auto notices = rig.client.of("stream");
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].content["text"].get<std::string>().find("debug session was ended") !=
        std::string::npos);
  CHECK(rig.audit.of("debug_session_ended").size() == 1);
  CHECK(rig.core.pauses_ended == 1);
  // The session is over: its events and its pauses are ignored until the next initialize.
  rig.core.budget.reset(1 << 20);
  rig.from_worker({{"type", "debug_event"}, {"content", event("output")}});
  CHECK(rig.client.of("debug_event").size() == 1);
  rig.from_worker({{"type", "debug_state"}, {"paused", true}});
  CHECK(rig.core.pauses == std::vector<bool>{false});
}

TEST_CASE("debug link: a large essential event ends the session too", "[debug_link]") {
  Rig rig;
  rig.start();
  rig.start_session();
  std::string big(DebugLink::kEssentialEventBytes, 'x');
  rig.from_worker({{"type", "debug_event"}, {"content", event("stopped", {{"text", big}})}});
  auto events = rig.client.of("debug_event");
  REQUIRE(events.size() == 1);
  CHECK(events[0].content["event"] == "terminated");
  CHECK(rig.client.of("stream")[0].content["text"].get<std::string>().find("KiB an event") !=
        std::string::npos);
}

TEST_CASE("debug link: the worker's pause is told to the core while a session is started",
          "[debug_link]") {
  Rig rig;
  rig.start();
  rig.from_worker({{"type", "debug_state"}, {"paused", true}});  // no session: not believed
  rig.start_session();
  rig.from_worker({{"type", "debug_state"}, {"paused", true}});
  rig.from_worker({{"type", "debug_state"}, {"paused", "yes"}});  // dropped
  CHECK(rig.core.pauses == std::vector<bool>{false, true});
  CHECK(rig.link.paused());
}

TEST_CASE("debug link: a worker that leaves its debug requests unread is at fault",
          "[debug_link]") {
  Rig rig;
  rig.start();
  // The worker answers each request and reads none: the outbox grows past its bound.
  std::string expression(1u << 20, '1');
  for (int i = 0; i < 40 && rig.worker.faults.empty(); ++i) {
    rig.link.serve(request("debug_request", "e" + std::to_string(i),
                           dap("evaluate", i, {{"expression", expression}})));
    if (rig.worker.faults.empty()) rig.answer_last(response("evaluate", i));
  }
  REQUIRE(rig.worker.faults.size() == 1);
  CHECK(rig.worker.faults[0].find("of debug requests unread") != std::string::npos);
}

TEST_CASE(
    "debug link: the channel's EOF is no fault, and what is pending is answered after the "
    "grace",
    "[debug_link]") {
  Rig rig;
  rig.start();
  rig.link.serve(request("debug_request", "p", dap("initialize", 1)));
  CHECK(rig.to_worker().size() == 1);  // read: a socket closed with unread data is reset
  rig.theirs.reset();                  // the worker closes its end
  rig.link.read();
  CHECK(rig.link.poll_fd() == -1);
  CHECK(rig.worker.faults.empty());
  CHECK(rig.replies().empty());
  auto due = rig.link.next_deadline();
  REQUIRE(due);
  rig.link.check_deadlines(*due - std::chrono::milliseconds(1));
  CHECK(rig.replies().empty());
  rig.link.check_deadlines(*due);
  REQUIRE(rig.replies().size() == 1);
  CHECK(rig.replies()[0].content["message"].get<std::string>().find("closed its channel") !=
        std::string::npos);
  CHECK(rig.core.pauses_ended == 1);
}
