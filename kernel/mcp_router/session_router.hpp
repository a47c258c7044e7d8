#pragma once
// The MCP session router: what `belljar mcp` is in front of its sessions. Each session is its
// own process, `belljar mcp --one-session` (kernel/mcp: the single-session server, unchanged),
// with its own kernel and sandbox; the router only reads and rewrites JSON-RPC.
//
// A session is named by a handle the router mints (a uuid4 from getrandom: unguessable), which
// an agent passes as the `session` argument of any tool. Without one, the MCP session's own
// sandbox is meant (the default session, started with the router), so a client that knows
// nothing of handles sees today's server. open_session, close_session and list_sessions are
// answered here; every other request goes to the session it names, with its id rewritten to
// the router's own (two sessions' answers never meet), and a task is routed by the id its
// session gave it.
//
// What passes: a request or notification the client sent, to the session it names or to the
// default one; a session's answer to a request the router sent it, and its notifications, to
// the client. A session's answer to an id the router did not send it is dropped.
//
// This class does no I/O: it is told what arrived and leaves what to write, start and stop in
// its outbox (session_processes.hpp does the processes, router_loop.hpp the polling).
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernel/mcp/json_rpc.hpp"
#include "kernel/mcp/mcp_revision.hpp"

namespace belljar {

struct RouterLimits {
  size_t max_sessions = 8;                   // live sessions, the default one among them
  std::chrono::milliseconds idle_timeout{};  // 0: never; for sessions open_session made
};

class SessionRouter {
 public:
  using Clock = std::chrono::steady_clock;
  using SessionKey = uint64_t;
  static constexpr SessionKey kDefaultSession = 0;
  // Task ids routed to their session: at most this many (each session keeps 64 tasks).
  static constexpr size_t kMaxTasksRemembered = 4096;

  struct Start {
    SessionKey key;
    std::string kernel_id;  // the session's audit identity, minted here
  };
  struct Stop {
    SessionKey key;
    bool now;  // false: its input closes, and it ends once its calls are answered
  };
  struct Outbox {
    std::vector<std::string> to_client;  // JSON lines, in order
    std::vector<std::pair<SessionKey, std::string>> to_sessions;
    std::vector<Start> start;
    std::vector<Stop> stop;
    std::vector<std::pair<std::string, nlohmann::json>> audit;  // event, fields
  };

  // `mint` gives each handle and kernel id (new_uuid; a test's own sequence).
  SessionRouter(RouterLimits limits, std::function<std::string()> mint);

  // The default session, started with the router.
  void start(Clock::time_point now);
  void from_client(std::string_view line, Clock::time_point now);
  // A message past `max` bytes, dropped whole: the client is told (a parse error, no id).
  void client_message_too_long(size_t max);
  // The client left (`reason`, for the audit log): every session's input closes.
  void client_closed(const std::string& reason);
  void from_session(SessionKey key, std::string_view line, Clock::time_point now);
  // Its process ended (`how`: "exit status 1", "signal 9"): what waited on it is answered.
  void session_ended(SessionKey key, const std::string& how, Clock::time_point now);
  void on_timers(Clock::time_point now);
  std::optional<Clock::time_point> next_due() const;
  Outbox take() { return std::exchange(outbox_, Outbox{}); }

  // The client left and every session ended: the router is done.
  bool done() const { return !client_open_ && sessions_.empty(); }
  // The default session ended before it answered anything: the flags were refused, say.
  bool default_failed_to_start() const { return default_failed_to_start_; }
  size_t live_sessions() const;

 private:
  struct Session {
    std::string handle;
    std::string kernel_id;
    Clock::time_point last_active;
    size_t in_flight = 0;   // requests sent, not yet answered
    bool answered = false;  // said anything at all (the default session: it started)
    bool ready = false;     // answered the router's initialize (opened sessions)
    bool stopping = false;
    std::string stop_reason;               // asked, idle, the client left...
    bool probing = false;                  // asked for its tasks before idling out
    std::optional<nlohmann::json> opener;  // the open_session call answered once ready
    const McpRevision* opener_revision = nullptr;
  };
  enum class Purpose {
    forward,       // the answer goes back as it is
    initialize,    // the client's initialize or server/discover: instructions say sessions
    tools_list,    // the session tools added, `session` in each tool's arguments
    task_call,     // a tools/call run as a task: its id is routed to this session
    tasks_list,    // one of a tasks/list's several: gathered
    session_init,  // the router's initialize of a session it opened
    idle_probe,    // the router's tasks/list before idling a session out
  };
  struct Pending {
    Purpose purpose;
    SessionKey session;
    nlohmann::json client_id;  // null: the router's own request
    const McpRevision* revision;
    uint64_t gathering = 0;
  };
  struct Gathering {
    nlohmann::json client_id;
    const McpRevision* revision;
    size_t waiting = 0;
    nlohmann::json tasks = nlohmann::json::array();
  };

  void handle_request(const JsonRpcMessage& message, Clock::time_point now);
  void handle_notification(const JsonRpcMessage& message);
  void handle_session_tool(const std::string& name, const JsonRpcMessage& message,
                           const McpRevision& revision, Clock::time_point now);
  void open_session(const JsonRpcMessage& message, const McpRevision& revision,
                    Clock::time_point now);
  void answer_opener(Session& session, std::optional<std::string> failure);
  void gather_tasks(const JsonRpcMessage& message, const McpRevision& revision,
                    Clock::time_point now);
  void finish_gathering(uint64_t id);
  // Sends `message` (its id rewritten) to `key`; false with the client answered when the
  // session is gone.
  bool forward(SessionKey key, const JsonRpcMessage& message, Purpose purpose,
               const McpRevision& revision, Clock::time_point now, uint64_t gathering = 0);
  void send_request(SessionKey key, int64_t id, const std::string& method, nlohmann::json params);
  void answer_response(SessionKey key, const nlohmann::json& response, Clock::time_point now);
  void stop_session(SessionKey key, const std::string& reason, bool now);
  void start_default(const std::string& handle, Clock::time_point now);
  void remember_task(const std::string& id, SessionKey key);
  // The session `message`'s `session` argument names (the default one without it), or the
  // JSON-RPC error that says why not.
  std::optional<SessionKey> session_named(const nlohmann::json& arguments,
                                          const nlohmann::json& id);
  void answer(const nlohmann::json& id, nlohmann::json result, const McpRevision& revision);
  void to_client(const nlohmann::json& message);
  const McpRevision& revision_of(const JsonRpcMessage& message) const;
  nlohmann::json initialize_params() const;

  RouterLimits limits_;
  std::function<std::string()> mint_;
  std::map<SessionKey, Session> sessions_;
  std::map<std::string, SessionKey> by_handle_;
  std::map<int64_t, Pending> pending_;
  std::map<std::string, SessionKey> task_sessions_;
  std::map<std::string, std::string> ended_tasks_;  // a task of an ended session: how it ended
  std::deque<std::string> task_order_;              // the ids of both maps, oldest first
  std::deque<Clock::time_point> default_restarts_;  // in the last minute
  std::map<uint64_t, Gathering> gatherings_;
  std::optional<nlohmann::json> client_initialize_;  // the client's initialize params
  bool client_initialized_ = false;                  // it said notifications/initialized
  const McpRevision* revision_ = nullptr;            // what initialize settled on
  int64_t next_id_ = 1;
  SessionKey next_key_ = kDefaultSession + 1;
  uint64_t next_gathering_ = 1;
  bool client_open_ = true;
  bool default_failed_to_start_ = false;
  Outbox outbox_;
};

}  // namespace belljar
