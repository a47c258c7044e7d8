#pragma once
// The MCP session router: what `belljar mcp` is in front of its sessions. Each session is its
// own process, `belljar mcp --one-session` (kernel/mcp: the single-session server, unchanged),
// with its own kernel and sandbox; the router only reads and rewrites JSON-RPC.
//
// A session is named by a handle the router mints (a uuid4 from getrandom: unguessable), which
// an agent passes as the `session` argument of any tool. Without one, the MCP session's own
// sandbox is meant (each client's own session), so a client that knows nothing of handles sees
// today's server. Clients are stdio's one, or over HTTP one per Mcp-Session-Id and one for
// every stateless request; all hold the server's token, so a session open_session made is any
// client's to use, while a client's own session is reached by that client alone. open_session,
// close_session and list_sessions are answered here; every other request goes to the session it
// names, with its id rewritten to the router's own (two sessions' answers never meet), and a task
// is routed by the id its session gave it.
//
// What passes: a request or notification the client sent, to the session it names or to the
// caller's own; a session's answer to a request the router sent it, to the caller that asked;
// its notifications to the caller whose progress token they carry, the client whose task they
// name, or the session's owner. A session's answer to an id the router did not send it, and a
// progress token it was never given, are dropped.
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
  size_t max_sessions = 8;                   // live sessions, every client's own among them
  std::chrono::milliseconds idle_timeout{};  // 0: never; opened sessions, HTTP clients' own
};

class SessionRouter {
 public:
  using Clock = std::chrono::steady_clock;
  using SessionKey = uint64_t;
  using ClientKey = uint64_t;
  // Who sent a message, and where its answer goes. `client` names the MCP session (stdio's one
  // client; over HTTP an Mcp-Session-Id, or every stateless request together); `exchange` one
  // HTTP request's reply stream (0: the client's standing channel, stdio's stdout).
  struct Caller {
    ClientKey client = 0;
    uint64_t exchange = 0;
    bool operator==(const Caller&) const = default;
  };
  // The client start() opens: stdio's only one; over HTTP, every request without an
  // Mcp-Session-Id (the stateless revision's). Its own session is the first session.
  static constexpr ClientKey kFirstClient = 1;
  static constexpr SessionKey kFirstSession = 0;
  // Task ids and progress tokens routed to their session: at most this many each.
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
    std::vector<std::pair<Caller, std::string>> to_client;  // JSON lines, in order
    std::vector<std::pair<SessionKey, std::string>> to_sessions;
    std::vector<Start> start;
    std::vector<Stop> stop;
    std::vector<std::pair<std::string, nlohmann::json>> audit;  // event, fields
    std::vector<ClientKey> ended_clients;  // their own session is gone for good (HTTP: 404)
    std::vector<Caller> dropped;           // a call the client cancelled: never answered (HTTP: its
                                           // request's stream ends)
  };

  // `mint` gives each handle and kernel id (new_uuid; a test's own sequence).
  SessionRouter(RouterLimits limits, std::function<std::string()> mint);

  // The first client and its own session, started at once (refused flags show at start).
  void start(Clock::time_point now);
  // A client that starts its own session at its first call, and whose own session idles out
  // (an HTTP client may leave without a word): an Mcp-Session-Id the HTTP side minted.
  void add_client(ClientKey key);
  bool has_client(ClientKey key) const { return clients_.count(key) != 0; }
  void from_client(Caller caller, std::string_view line, Clock::time_point now);
  // A message past `max` bytes, dropped whole: the client is told (a parse error, no id).
  void client_message_too_long(Caller caller, size_t max);
  // The exchange's stream closed before its answers (the stateless revision's cancel): what
  // it asked is cancelled in its session.
  void exchange_closed(Caller caller);
  // The client ended its MCP session (HTTP DELETE, `reason` for the audit log): its own
  // session's input closes.
  void client_closed(ClientKey key, const std::string& reason);
  // The server stops (stdio's input ended, a signal): every session's input closes.
  void shutdown(const std::string& reason);
  void from_session(SessionKey key, std::string_view line, Clock::time_point now);
  // Its process ended (`how`: "exit status 1", "signal 9"): what waited on it is answered.
  void session_ended(SessionKey key, const std::string& how, Clock::time_point now);
  void on_timers(Clock::time_point now);
  std::optional<Clock::time_point> next_due() const;
  Outbox take() { return std::exchange(outbox_, Outbox{}); }

  // The server stopped and every session ended: the router is done.
  bool done() const { return shut_down_ && sessions_.empty(); }
  // The first session ended before it answered anything: the flags were refused, say.
  bool first_failed_to_start() const { return first_failed_to_start_; }
  size_t live_sessions() const;

 private:
  struct Client {
    std::optional<SessionKey> own;             // its own session, once started
    std::optional<nlohmann::json> initialize;  // its initialize params
    bool initialized = false;                  // it said notifications/initialized
    const McpRevision* revision = nullptr;     // what its initialize settled on
    bool idles = false;                        // its own session idles out (HTTP)
    bool lost = false;                         // its own session ended for good
    std::deque<Clock::time_point> restarts;    // of its own session, in the last minute
  };
  struct Session {
    std::string handle;
    std::string kernel_id;
    ClientKey owner = 0;  // whose own session it is, or who opened it
    bool own = false;     // its owner's own session (no handle reaches it from another client)
    Clock::time_point last_active;
    size_t in_flight = 0;   // requests sent, not yet answered
    bool answered = false;  // said anything at all (an own session: it started)
    bool ready = false;     // answered the router's initialize (opened sessions)
    bool stopping = false;
    std::string stop_reason;               // asked, idle, the client left...
    bool probing = false;                  // asked for its tasks before idling out
    std::optional<nlohmann::json> opener;  // the open_session call answered once ready
    Caller opener_caller;
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
    Caller caller;
    nlohmann::json client_id;  // null: the router's own request
    const McpRevision* revision;
    uint64_t gathering = 0;
  };
  struct Gathering {
    Caller caller;
    nlohmann::json client_id;
    const McpRevision* revision;
    size_t waiting = 0;
    nlohmann::json tasks = nlohmann::json::array();
  };
  struct ProgressRoute {
    Caller caller;
    nlohmann::json token;  // the client's own
  };
  struct TaskRoute {
    SessionKey session;
    ClientKey client;
  };

  void handle_request(Caller caller, const JsonRpcMessage& message, Clock::time_point now);
  void handle_notification(Caller caller, const JsonRpcMessage& message);
  void handle_session_tool(Caller caller, const std::string& name, const JsonRpcMessage& message,
                           const McpRevision& revision, Clock::time_point now);
  void open_session(Caller caller, const JsonRpcMessage& message, const McpRevision& revision,
                    Clock::time_point now);
  void answer_opener(Session& session, std::optional<std::string> failure);
  void gather_tasks(Caller caller, const JsonRpcMessage& message, const McpRevision& revision,
                    Clock::time_point now);
  void finish_gathering(uint64_t id);
  // Sends `message` (its id and progress token rewritten) to `key`; false with the client
  // answered when the session is gone.
  bool forward(Caller caller, SessionKey key, const JsonRpcMessage& message, Purpose purpose,
               const McpRevision& revision, Clock::time_point now, uint64_t gathering = 0);
  void send_request(SessionKey key, int64_t id, const std::string& method, nlohmann::json params);
  void answer_response(SessionKey key, const nlohmann::json& response, Clock::time_point now);
  void route_notification(SessionKey key, nlohmann::json message);
  void stop_session(SessionKey key, const std::string& reason, bool now);
  // Starts `client`'s own session (under `handle`, when it starts again); false when the
  // bound leaves no room.
  bool start_own(ClientKey client, const std::string& handle, Clock::time_point now);
  // The caller's own session, started if it has none yet; nullopt with the caller answered.
  std::optional<SessionKey> own_session(Caller caller, const nlohmann::json& id,
                                        Clock::time_point now);
  void client_lost(ClientKey client);
  void remember_task(const std::string& id, TaskRoute route);
  void remember_progress(int64_t ours, ProgressRoute route);
  // The session `message`'s `session` argument names (the caller's own without it), or the
  // JSON-RPC error that says why not.
  std::optional<SessionKey> session_named(Caller caller, const nlohmann::json& arguments,
                                          const nlohmann::json& id, Clock::time_point now);
  bool reaches(Caller caller, SessionKey key) const;
  // Ends once idle past the timeout: an opened session, or an HTTP client's own.
  bool idles(const Session& session) const;
  void answer(Caller caller, const nlohmann::json& id, nlohmann::json result,
              const McpRevision& revision);
  void to_client(Caller caller, const nlohmann::json& message);
  const McpRevision& revision_of(Caller caller, const JsonRpcMessage& message) const;
  const McpRevision& settled_revision(ClientKey client) const;
  nlohmann::json initialize_params(ClientKey client) const;
  std::string session_limit_reached() const;

  RouterLimits limits_;
  std::function<std::string()> mint_;
  std::map<ClientKey, Client> clients_;
  std::map<SessionKey, Session> sessions_;
  std::map<std::string, SessionKey> by_handle_;
  std::map<int64_t, Pending> pending_;
  std::map<std::string, TaskRoute> task_sessions_;
  std::map<std::string, std::string> ended_tasks_;  // a task of an ended session: how it ended
  std::deque<std::string> task_order_;              // the ids of both maps, oldest first
  std::map<int64_t, ProgressRoute> progress_;       // the router's token: the client's
  std::deque<int64_t> progress_order_;
  std::map<uint64_t, Gathering> gatherings_;
  int64_t next_id_ = 1;
  SessionKey next_key_ = kFirstSession;
  uint64_t next_gathering_ = 1;
  bool shut_down_ = false;
  bool first_failed_to_start_ = false;
  Outbox outbox_;
};

}  // namespace belljar
