// The MCP session router's routing: ids rewritten both ways, handles, the session tools, tasks
// followed to their session, idle sessions ended, and what a session may not answer.
#include "kernel/mcp_router/session_router.hpp"

#include <catch2/catch.hpp>

using namespace belljar;
using json = nlohmann::json;
using namespace std::chrono_literals;
using Key = SessionRouter::SessionKey;
using ClientKey = SessionRouter::ClientKey;

namespace {

struct Rig {
  int minted = 0;
  SessionRouter router{RouterLimits{3, 60s}, [this] { return "h" + std::to_string(++minted); }};
  SessionRouter::Clock::time_point now = SessionRouter::Clock::now();
  SessionRouter::Outbox out;
  SessionRouter::Caller caller{SessionRouter::kFirstClient, 0};

  Rig() {
    router.start(now);
    take();
  }
  void take() { out = router.take(); }
  void client(json message) {
    message["jsonrpc"] = "2.0";
    router.from_client(caller, message.dump(), now);
    take();
  }
  json request(json id, const std::string& method, json params) {
    client({{"id", id}, {"method", method}, {"params", params}});
    return out.to_sessions.empty() ? json() : json::parse(out.to_sessions.back().second);
  }
  void answer(Key key, json id, json result) {
    router.from_session(key, json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}.dump(), now);
    take();
  }
  json to_client() const {
    REQUIRE(out.to_client.size() == 1);
    CHECK(out.to_client[0].first == caller);
    return json::parse(out.to_client[0].second);
  }
  // run_python in `handle`'s session as a task, which that session names `task_id`: the key.
  Key task(const std::string& handle, json id, const std::string& task_id) {
    json sent = request(id, "tools/call",
                        {{"name", "run_python"},
                         {"arguments", {{"code", "x"}, {"session", handle}}},
                         {"task", {{"ttl", 60000}}}});
    Key session = out.to_sessions.at(0).first;
    answer(session, sent["id"], {{"task", {{"taskId", task_id}, {"status", "working"}}}});
    return session;
  }
  // Another client (an HTTP client's: its own session idles out), its own session started by a
  // tools/list and answered: that session's key.
  Key http_client(ClientKey key) {
    router.add_client(key);
    caller = {key, 1};
    json sent = request(1, "tools/list", json::object());
    Key its_own = out.to_sessions.at(0).first;
    answer(its_own, sent["id"], {{"tools", json::array()}});
    return its_own;
  }
  // open_session, answered once the new session answered the router's initialize.
  std::string open(json id) {
    request(id, "tools/call", {{"name", "open_session"}, {"arguments", json::object()}});
    REQUIRE(out.start.size() == 1);
    Key key = out.start[0].key;
    json init = json::parse(out.to_sessions.at(0).second);
    CHECK(init["method"] == "initialize");
    answer(key, init["id"], {{"protocolVersion", "2025-11-25"}});
    return to_client()["result"]["structuredContent"]["session"];
  }
};

}  // namespace

TEST_CASE(
    "a request reaches the default session under the router's id, and its answer the client's",
    "[mcp_router]") {
  Rig rig;
  json sent =
      rig.request("a", "tools/call", {{"name", "run_python"}, {"arguments", {{"code", "1"}}}});
  REQUIRE(rig.out.to_sessions.size() == 1);
  CHECK(rig.out.to_sessions[0].first == SessionRouter::kFirstSession);
  CHECK(sent["id"].is_number_integer());
  CHECK(sent["params"]["arguments"] == json{{"code", "1"}});
  // An answer to an id the router did not send, or from a session it was not sent to: dropped.
  rig.answer(SessionRouter::kFirstSession, 999, json::object());
  CHECK(rig.out.to_client.empty());
  rig.answer(SessionRouter::kFirstSession, sent["id"], {{"content", json::array()}});
  CHECK(rig.to_client()["id"] == "a");
  rig.answer(SessionRouter::kFirstSession, sent["id"], json::object());  // only once
  CHECK(rig.out.to_client.empty());
  // What is not JSON-RPC is answered by the router itself.
  rig.router.from_client(rig.caller, "{not json", rig.now);
  rig.take();
  CHECK(rig.to_client()["error"]["code"] == -32700);
}

TEST_CASE("open_session gives a handle that routes tools to its own session", "[mcp_router]") {
  Rig rig;
  std::string handle = rig.open(7);
  CHECK(handle == "h3");  // h1, h2: the default session's handle and kernel id
  CHECK(rig.router.live_sessions() == 2);
  json sent =
      rig.request(8, "tools/call",
                  {{"name", "run_python"}, {"arguments", {{"code", "x"}, {"session", handle}}}});
  REQUIRE(rig.out.to_sessions.size() == 1);
  CHECK(rig.out.to_sessions[0].first != SessionRouter::kFirstSession);
  CHECK_FALSE(sent["params"]["arguments"].contains("session"));  // the session's tools know none
  rig.request(9, "tools/call",
              {{"name", "run_python"}, {"arguments", {{"code", "x"}, {"session", "guess"}}}});
  CHECK(rig.out.to_sessions.empty());
  CHECK(rig.to_client()["error"]["code"] == -32602);
  rig.request(10, "tools/call",
              {{"name", "run_python"}, {"arguments", {{"code", "x"}, {"session", 5}}}});
  CHECK(rig.to_client()["error"]["code"] == -32602);
}

TEST_CASE("past --max-sessions, one more session is a clear error and starts nothing",
          "[mcp_router]") {
  Rig rig;
  rig.open(1);
  rig.open(2);
  rig.request(3, "tools/call", {{"name", "open_session"}, {"arguments", json::object()}});
  CHECK(rig.out.start.empty());
  json refused = rig.to_client();
  CHECK(refused["error"]["code"] == -32000);
  CHECK(refused["error"]["message"].get<std::string>().find("--max-sessions 3") !=
        std::string::npos);
}

TEST_CASE("tools/list names the session argument and the session tools", "[mcp_router]") {
  Rig rig;
  json sent = rig.request(1, "tools/list", json::object());
  json schema = {{"type", "object"}, {"properties", {{"code", {{"type", "string"}}}}}};
  rig.answer(SessionRouter::kFirstSession, sent["id"],
             {{"tools", json::array({{{"name", "run_python"}, {"inputSchema", schema}}})}});
  json tools = rig.to_client()["result"]["tools"];
  REQUIRE(tools.size() == 4);
  CHECK(tools[0]["inputSchema"]["properties"].contains("session"));
  CHECK(tools[1]["name"] == "open_session");
  CHECK(tools[2]["name"] == "close_session");
  CHECK(tools[3]["name"] == "list_sessions");
}

TEST_CASE("a task's later requests go to the session that made it, tasks/list gathers all",
          "[mcp_router]") {
  Rig rig;
  std::string handle = rig.open(1);
  Key session = rig.task(handle, 2, "t-1");
  rig.request(3, "tasks/get", {{"taskId", "t-1"}});
  CHECK(rig.out.to_sessions[0].first == session);
  rig.request(4, "tasks/get", {{"taskId", "never-issued"}});
  CHECK(rig.out.to_sessions[0].first == SessionRouter::kFirstSession);
  rig.request(5, "tasks/list", json::object());
  REQUIRE(rig.out.to_sessions.size() == 2);
  auto asked = rig.out.to_sessions;
  rig.answer(asked[0].first, json::parse(asked[0].second)["id"], {{"tasks", json::array()}});
  CHECK(rig.out.to_client.empty());  // still waiting for the other
  rig.answer(asked[1].first, json::parse(asked[1].second)["id"],
             {{"tasks", json::array({{{"taskId", "t-1"}}})}});
  json listed = rig.to_client();
  CHECK(listed["id"] == 5);
  CHECK(listed["result"]["tasks"].size() == 1);
}

TEST_CASE("close_session ends an opened session, what waited on it is answered", "[mcp_router]") {
  Rig rig;
  std::string handle = rig.open(1);
  rig.request(2, "tools/call", {{"name", "close_session"}, {"arguments", {{"session", "h1"}}}});
  CHECK(rig.to_client()["error"]["code"] == -32602);  // the connection's own: not closed so
  json sent = rig.request(
      3, "tools/call",
      {{"name", "run_python"}, {"arguments", {{"code", "while True: pass"}, {"session", handle}}}});
  Key session = rig.out.to_sessions[0].first;
  rig.request(4, "tools/call", {{"name", "close_session"}, {"arguments", {{"session", handle}}}});
  REQUIRE(rig.out.stop.size() == 1);
  CHECK(rig.out.stop[0].key == session);
  CHECK(rig.out.stop[0].now);
  CHECK(rig.to_client()["result"]["structuredContent"]["closed"] == handle);
  rig.router.session_ended(session, "signal 15", rig.now);
  rig.take();
  json ended = rig.to_client();
  CHECK(ended["id"] == 3);
  CHECK(ended["error"]["code"] == -32000);
  rig.request(5, "tools/call",
              {{"name", "run_python"}, {"arguments", {{"code", "x"}, {"session", handle}}}});
  CHECK(rig.to_client()["error"]["code"] == -32602);
}

TEST_CASE("an opened session idle past --idle-timeout is ended, unless a task still runs",
          "[mcp_router]") {
  Rig rig;
  std::string handle = rig.open(1);
  REQUIRE(rig.router.next_due());
  CHECK(*rig.router.next_due() == rig.now + 60s);
  rig.now += 61s;
  rig.router.on_timers(rig.now);
  rig.take();
  REQUIRE(rig.out.to_sessions.size() == 1);  // first asked whether a task runs there
  auto [session, probe] = rig.out.to_sessions[0];
  rig.answer(session, json::parse(probe)["id"],
             {{"tasks", json::array({{{"taskId", "t"}, {"status", "completed"}}})}});
  CHECK(rig.out.stop.empty());  // a result kept for its ttl is no idleness
  rig.now += 61s;
  rig.router.on_timers(rig.now);
  rig.take();
  rig.answer(session, json::parse(rig.out.to_sessions.at(0).second)["id"],
             {{"tasks", json::array()}});
  REQUIRE(rig.out.stop.size() == 1);
  REQUIRE(rig.out.audit.size() == 1);
  CHECK(rig.out.audit[0].first == "mcp_session_close");
  CHECK(rig.out.audit[0].second["reason"] == "idle");
  CHECK(rig.out.to_client.empty());  // the router's own question is never the client's
}

TEST_CASE("the default session ending before it said anything: the router says it failed",
          "[mcp_router]") {
  Rig rig;
  rig.router.session_ended(SessionRouter::kFirstSession, "exit status 2", rig.now);
  CHECK(rig.router.first_failed_to_start());
}

TEST_CASE("the connection's own session starts again when it dies, ping is the router's",
          "[mcp_router]") {
  Rig rig;
  json init = rig.request(1, "initialize", {{"protocolVersion", "2025-11-25"}});
  rig.answer(SessionRouter::kFirstSession, init["id"], {{"protocolVersion", "2025-11-25"}});
  json sent =
      rig.request(2, "tools/call", {{"name", "run_python"}, {"arguments", {{"code", "1"}}}});
  rig.router.session_ended(SessionRouter::kFirstSession, "signal 9", rig.now);
  rig.take();
  CHECK_FALSE(rig.router.first_failed_to_start());
  REQUIRE(rig.out.start.size() == 1);  // a new process for it, given the client's handshake
  Key restarted = rig.out.start[0].key;
  REQUIRE(rig.out.to_sessions.size() == 1);
  CHECK(rig.out.to_sessions[0].first == restarted);
  CHECK(json::parse(rig.out.to_sessions[0].second)["method"] == "initialize");
  REQUIRE(rig.out.to_client.size() == 1);  // the call it died under: answered
  CHECK(json::parse(rig.out.to_client[0].second)["id"] == 2);
  rig.request(3, "ping", json::object());
  CHECK(rig.out.to_sessions.empty());
  CHECK(rig.to_client()["result"] == json::object());
  // Three deaths in a minute are a loop: no fourth start.
  for (int i = 0; i < 3; ++i) {
    rig.router.session_ended(restarted, "signal 9", rig.now);
    rig.take();
    if (i < 2) {
      REQUIRE(rig.out.start.size() == 1);
      restarted = rig.out.start[0].key;
    }
  }
  CHECK(rig.out.start.empty());
  rig.request(4, "tools/list", json::object());
  CHECK(rig.to_client()["error"]["code"] == -32000);
}

TEST_CASE("a cancelled call leaves the router: its id may be used again", "[mcp_router]") {
  Rig rig;
  std::string handle = rig.open(1);
  auto call = [&](const char* code) {
    return rig.request(
        "x", "tools/call",
        {{"name", "run_python"}, {"arguments", {{"code", code}, {"session", handle}}}});
  };
  json first = call("slow()");
  rig.client({{"method", "notifications/cancelled"}, {"params", {{"requestId", "x"}}}});
  REQUIRE(rig.out.to_sessions.size() == 1);
  CHECK(json::parse(rig.out.to_sessions[0].second)["params"]["requestId"] == first["id"]);
  json second = call("slower()");
  rig.client({{"method", "notifications/cancelled"}, {"params", {{"requestId", "x"}}}});
  REQUIRE(rig.out.to_sessions.size() == 1);
  CHECK(json::parse(rig.out.to_sessions[0].second)["params"]["requestId"] == second["id"]);
  // Nothing is in flight: the session idles out.
  rig.now += 61s;
  rig.router.on_timers(rig.now);
  rig.take();
  CHECK(rig.out.to_sessions.size() == 1);  // the idle probe
}

TEST_CASE("a task of a session that ended is answered for, and the session tools are no tasks",
          "[mcp_router]") {
  Rig rig;
  std::string handle = rig.open(1);
  Key session = rig.task(handle, 2, "t-9");
  rig.request(3, "tools/call", {{"name", "close_session"}, {"arguments", {{"session", handle}}}});
  rig.router.session_ended(session, "signal 15", rig.now);
  rig.take();
  rig.request(4, "tasks/result", {{"taskId", "t-9"}});
  CHECK(rig.out.to_sessions.empty());
  CHECK(rig.to_client()["error"]["message"] == "task not found: its session ended (asked)");
  rig.request(5, "tools/call", {{"name", "list_sessions"}, {"task", json::object()}});
  CHECK(rig.to_client()["error"]["code"] == -32601);
  rig.request(6, "tools/call", {{"name", "list_sessions"}, {"arguments", {{"session", "h1"}}}});
  CHECK(rig.to_client()["error"]["code"] == -32602);
  // A null session is no session: the connection's own.
  rig.request(7, "tools/call",
              {{"name", "run_python"}, {"arguments", {{"code", "x"}, {"session", nullptr}}}});
  REQUIRE(rig.out.to_sessions.size() == 1);
  CHECK(rig.out.to_sessions[0].first == SessionRouter::kFirstSession);
}

TEST_CASE("the router remembers a bounded number of task ids", "[mcp_router]") {
  Rig rig;
  std::string handle = rig.open(1);
  Key session = 0;
  for (size_t i = 0; i <= SessionRouter::kMaxTasksRemembered; ++i) {
    session = rig.task(handle, static_cast<int>(i) + 10, "t" + std::to_string(i));
  }
  rig.request(1, "tasks/get", {{"taskId", "t0"}});  // the oldest, forgotten
  CHECK(rig.out.to_sessions[0].first == SessionRouter::kFirstSession);
  rig.request(2, "tasks/get", {{"taskId", "t1"}});
  CHECK(rig.out.to_sessions[0].first == session);
}

TEST_CASE("each client has its own session, which no other client's handle reaches",
          "[mcp_router]") {
  Rig rig;
  const ClientKey second = 7;
  rig.router.add_client(second);
  rig.caller = {second, 1};
  json sent = rig.request(1, "initialize", {{"protocolVersion", "2025-11-25"}});
  REQUIRE(rig.out.start.size() == 1);  // its own session starts with its first call
  Key its_own = rig.out.start[0].key;
  CHECK(rig.out.to_sessions.at(0).first == its_own);
  rig.answer(its_own, sent["id"], {{"protocolVersion", "2025-11-25"}});
  CHECK(rig.to_client()["id"] == 1);  // to the caller that asked, on its exchange
  rig.request(2, "tools/call", {{"name", "list_sessions"}, {"arguments", json::object()}});
  json listed = rig.to_client()["result"]["structuredContent"]["sessions"];
  REQUIRE(listed.size() == 1);  // the first client's own session is not this one's
  std::string handle = listed[0]["session"];
  rig.caller = {SessionRouter::kFirstClient, 0};
  rig.request(3, "tools/call",
              {{"name", "run_python"}, {"arguments", {{"code", "x"}, {"session", handle}}}});
  CHECK(rig.out.to_sessions.empty());
  CHECK(rig.to_client()["error"]["code"] == -32602);
  // A session open_session made is any client's.
  std::string opened = rig.open(4);
  rig.caller = {second, 2};
  rig.request(5, "tools/call",
              {{"name", "run_python"}, {"arguments", {{"code", "x"}, {"session", opened}}}});
  REQUIRE(rig.out.to_sessions.size() == 1);
}

TEST_CASE("progress reaches the caller that asked for it, under its own token", "[mcp_router]") {
  Rig rig;
  const ClientKey second = 7;
  rig.router.add_client(second);
  json with_token = {
      {"name", "run_python"}, {"arguments", {{"code", "x"}}}, {"_meta", {{"progressToken", 1}}}};
  json first = rig.request(1, "tools/call", with_token);
  Key first_session = rig.out.to_sessions.at(0).first;
  rig.caller = {second, 9};
  json other = rig.request(1, "tools/call", with_token);  // the same id and token
  Key second_session = rig.out.to_sessions.at(0).first;   // its own, started for this call
  CHECK(first["params"]["_meta"]["progressToken"] != other["params"]["_meta"]["progressToken"]);
  auto progress = [&](Key session, const json& token) {
    rig.router.from_session(session,
                            json{{"jsonrpc", "2.0"},
                                 {"method", "notifications/progress"},
                                 {"params", {{"progressToken", token}, {"progress", 1}}}}
                                .dump(),
                            rig.now);
    rig.take();
  };
  progress(second_session, other["params"]["_meta"]["progressToken"]);
  REQUIRE(rig.out.to_client.size() == 1);
  CHECK(rig.out.to_client[0].first == SessionRouter::Caller{second, 9});
  CHECK(json::parse(rig.out.to_client[0].second)["params"]["progressToken"] == 1);
  // A token the session was never given, or another session's: nobody's.
  progress(second_session, first["params"]["_meta"]["progressToken"]);
  CHECK(rig.out.to_client.empty());
  progress(first_session, 424242);
  CHECK(rig.out.to_client.empty());
}

TEST_CASE("an exchange that closed cancels its call, a client that left ends its session",
          "[mcp_router]") {
  Rig rig;
  const ClientKey second = 7;
  rig.router.add_client(second);
  rig.caller = {second, 3};
  json sent =
      rig.request("a", "tools/call", {{"name", "run_python"}, {"arguments", {{"code", "1"}}}});
  Key its_own = rig.out.to_sessions.at(0).first;
  rig.router.exchange_closed(rig.caller);
  rig.take();
  REQUIRE(rig.out.to_sessions.size() == 1);
  json cancel = json::parse(rig.out.to_sessions[0].second);
  CHECK(cancel["method"] == "notifications/cancelled");
  CHECK(cancel["params"]["requestId"] == sent["id"]);
  rig.answer(its_own, sent["id"], json::object());  // too late: nobody's
  CHECK(rig.out.to_client.empty());
  rig.router.client_closed(second, "the client ended its MCP session");
  rig.take();
  REQUIRE(rig.out.stop.size() == 1);
  CHECK(rig.out.stop[0].key == its_own);
  rig.router.session_ended(its_own, "exit status 0", rig.now);
  rig.take();
  CHECK(rig.out.start.empty());  // not started again: it was asked to end
  CHECK(rig.out.ended_clients == std::vector<ClientKey>{second});
  CHECK_FALSE(rig.router.has_client(second));
}

TEST_CASE("an HTTP client's own session idles out, the first client's never does", "[mcp_router]") {
  Rig rig;
  const ClientKey second = 7;
  Key its_own = rig.http_client(second);
  REQUIRE(rig.router.next_due());
  rig.now += 61s;
  rig.router.on_timers(rig.now);
  rig.take();
  REQUIRE(rig.out.to_sessions.size() == 1);  // asked for its tasks first
  CHECK(rig.out.to_sessions[0].first == its_own);
  rig.answer(its_own, json::parse(rig.out.to_sessions[0].second)["id"], {{"tasks", json::array()}});
  REQUIRE(rig.out.stop.size() == 1);
  CHECK(rig.out.stop[0].key == its_own);
  CHECK(rig.out.audit.at(0).second["reason"] == "idle");
  rig.router.session_ended(its_own, "signal 15", rig.now);
  rig.take();
  CHECK(rig.out.ended_clients == std::vector<ClientKey>{second});
  CHECK_FALSE(rig.router.next_due());  // the first client's own is left alone
}

TEST_CASE("an HTTP client calling tools keeps its own session, a ping does not", "[mcp_router]") {
  Rig rig;
  Key its_own = rig.http_client(7);
  // Calls to a session it opened, every 40 s: its own session is not idle, though untouched.
  for (int i = 0; i < 3; ++i) {
    rig.now += 40s;
    rig.request(10 + i, "tools/call",
                {{"name", "run_python"}, {"arguments", {{"code", "1"}, {"session", "unknown"}}}});
    rig.router.on_timers(rig.now);
    rig.take();
    CHECK(rig.out.stop.empty());
  }
  // Pings alone keep nothing: past the timeout it is asked for its tasks, then ended.
  rig.now += 40s;
  rig.request(20, "ping", json::object());
  rig.now += 40s;
  rig.router.on_timers(rig.now);
  rig.take();
  bool probed = false;
  for (const auto& [key, line] : rig.out.to_sessions)
    if (key == its_own && json::parse(line)["method"] == "tasks/list") {
      probed = true;
      rig.answer(its_own, json::parse(line)["id"], {{"tasks", json::array()}});
    }
  REQUIRE(probed);
  REQUIRE(rig.out.stop.size() == 1);
  CHECK(rig.out.stop[0].key == its_own);
}
