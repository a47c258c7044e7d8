#include "kernel/mcp_router/session_router.hpp"

#include <cmath>

#include "kernel/mcp_router/session_tools.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {

// A session's process sent something that is not JSON: nothing of it reaches the client.
std::optional<json> parse_session_line(std::string_view line) {
  json message = json::parse(line, nullptr, false);
  if (message.is_discarded() || !message.is_object()) return std::nullopt;
  return message;
}

json request_line(int64_t id, const std::string& method, json params) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

// The words an agent reads when it names a handle no session has.
std::string unknown_session(const std::string& handle) {
  std::string shown = handle.size() > 40 ? handle.substr(0, 40) + "..." : handle;
  return "unknown session: " + shown +
         " (list_sessions shows the live ones; a closed or idled-out "
         "session's handle is not reused)";
}

constexpr JsonRpcError kServerBusy = static_cast<JsonRpcError>(-32000);

}  // namespace

SessionRouter::SessionRouter(RouterLimits limits, std::function<std::string()> mint)
    : limits_(limits), mint_(std::move(mint)) {}

void SessionRouter::start(Clock::time_point now) {
  start_default(mint_(), now);
}

void SessionRouter::start_default(const std::string& handle, Clock::time_point now) {
  Session& session = sessions_[kDefaultSession];
  session.handle = handle;
  session.kernel_id = mint_();
  session.last_active = now;
  session.ready = true;  // the client's own initialize reaches it
  by_handle_[session.handle] = kDefaultSession;
  outbox_.start.push_back({kDefaultSession, session.kernel_id});
  outbox_.audit.emplace_back("mcp_session_open",
                             json{{"session_kernel", session.kernel_id}, {"own", true}});
}

size_t SessionRouter::live_sessions() const {
  size_t live = 0;
  for (const auto& [key, session] : sessions_) live += session.stopping ? 0 : 1;
  return live;
}

// -- the client ----------------------------------------------------------------------------

void SessionRouter::from_client(std::string_view line, Clock::time_point now) {
  JsonRpcMessage message = parse_json_rpc(line);
  switch (message.kind) {
    case JsonRpcMessage::Kind::invalid:
      to_client(json_rpc_error(message.id, message.error, message.problem));
      return;
    case JsonRpcMessage::Kind::request:
      try {
        handle_request(message, now);
      } catch (const std::exception& e) {
        // A bug of ours costs one request, never the sessions.
        to_client(json_rpc_error(message.id, JsonRpcError::internal_error,
                                 std::string("internal error: ") + e.what()));
      }
      return;
    case JsonRpcMessage::Kind::notification:
      handle_notification(message);
      return;
    case JsonRpcMessage::Kind::response:
      return;  // no session sends the client requests
  }
}

void SessionRouter::client_message_too_long(size_t max) {
  to_client(
      json_rpc_error(nullptr, JsonRpcError::parse_error,
                     "parse error: message larger than " + std::to_string(max >> 20) + " MiB"));
}

const McpRevision& SessionRouter::revision_of(const JsonRpcMessage& message) const {
  std::optional<NamedRevision> named = revision_named_in(message.params);
  if (named && named->revision) return *named->revision;
  return revision_ ? *revision_ : negotiate_mcp_revision(nullptr);
}

void SessionRouter::handle_request(const JsonRpcMessage& message, Clock::time_point now) {
  std::optional<NamedRevision> named = revision_named_in(message.params);
  if (named && !named->revision) {
    to_client(unsupported_revision_error(message.id, named->unsupported));
    return;
  }
  const McpRevision& revision = revision_of(message);
  const std::string& method = message.method;
  if (method == "initialize") {
    client_initialize_ = message.params;
    forward(kDefaultSession, message, Purpose::initialize, revision, now);
  } else if (method == "tools/list") {
    forward(kDefaultSession, message, Purpose::tools_list, revision, now);
  } else if (method == "tools/call") {
    auto name = message.params.find("name");
    if (name != message.params.end() && name->is_string() &&
        is_session_tool(name->get_ref<const std::string&>())) {
      handle_session_tool(name->get<std::string>(), message, revision, now);
      return;
    }
    static const json no_arguments = json::object();
    auto arguments = message.params.find("arguments");
    const json& given = arguments != message.params.end() ? *arguments : no_arguments;
    std::optional<SessionKey> key = session_named(given, message.id);
    if (!key) return;
    JsonRpcMessage sent = message;
    if (sent.params.contains("arguments") && sent.params["arguments"].is_object())
      sent.params["arguments"].erase(std::string(kSessionArgument));
    bool task = message.params.contains("task");
    forward(*key, sent, task ? Purpose::task_call : Purpose::forward, revision, now);
  } else if (method == "ping") {
    answer(message.id, json::object(), revision);  // the router's own liveness
  } else if (method == "server/discover") {
    forward(kDefaultSession, message, Purpose::initialize, revision, now);
  } else if (method == "tasks/list" && revision.tasks) {
    gather_tasks(message, revision, now);
  } else if (method.rfind("tasks/", 0) == 0 && method != "tasks/list") {
    // A task is its session's: an id the router never saw goes to the default session, which
    // says it knows no such task; one of a session that ended is answered here.
    SessionKey key = kDefaultSession;
    auto task = message.params.find("taskId");
    if (task != message.params.end() && task->is_string()) {
      const std::string& id = task->get_ref<const std::string&>();
      if (auto ended = ended_tasks_.find(id); ended != ended_tasks_.end()) {
        to_client(json_rpc_error(message.id, JsonRpcError::invalid_params,
                                 "task not found: its session ended (" + ended->second + ")"));
        return;
      }
      if (auto known = task_sessions_.find(id); known != task_sessions_.end()) key = known->second;
    }
    forward(key, message, Purpose::forward, revision, now);
  } else {
    // ping, server/discover, and what no session speaks (it answers "method not found").
    forward(kDefaultSession, message, Purpose::forward, revision, now);
  }
}

void SessionRouter::handle_notification(const JsonRpcMessage& message) {
  if (message.method == "notifications/initialized") {
    client_initialized_ = true;
    for (auto& [key, session] : sessions_)
      if (!session.stopping && (key == kDefaultSession || session.ready))
        outbox_.to_sessions.emplace_back(
            key, json_rpc_notification(message.method, message.params).dump());
    return;
  }
  if (message.method == "notifications/cancelled") {
    // The client names its own id: the session knows the router's.
    auto id = message.params.find("requestId");
    if (id == message.params.end()) return;
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      const Pending& pending = it->second;
      if (pending.client_id != *id || pending.client_id.is_null()) continue;
      if (pending.purpose == Purpose::tasks_list) return;  // answered from what is gathered
      json params = message.params;
      params["requestId"] = it->first;
      outbox_.to_sessions.emplace_back(pending.session,
                                       json_rpc_notification(message.method, params).dump());
      // A cancelled call is never answered: it is no longer in flight, and its id may be used
      // again (the outside review: a reused id's cancel reached the stale call, and a session
      // with cancelled calls never idled out).
      if (auto session = sessions_.find(pending.session);
          session != sessions_.end() && session->second.in_flight > 0)
        session->second.in_flight--;
      pending_.erase(it);
      return;
    }
    return;
  }
  // Anything else is the default session's to ignore or act on.
  if (auto it = sessions_.find(kDefaultSession); it != sessions_.end() && !it->second.stopping)
    outbox_.to_sessions.emplace_back(kDefaultSession,
                                     json_rpc_notification(message.method, message.params).dump());
}

std::optional<SessionRouter::SessionKey> SessionRouter::session_named(const json& arguments,
                                                                      const json& id) {
  auto named =
      arguments.is_object() ? arguments.find(std::string(kSessionArgument)) : arguments.end();
  if (!arguments.is_object() || named == arguments.end() || named->is_null())
    return kDefaultSession;
  if (!named->is_string()) {
    to_client(json_rpc_error(id, JsonRpcError::invalid_params,
                             "invalid params: session is a handle (a string) open_session "
                             "returned"));
    return std::nullopt;
  }
  auto known = by_handle_.find(named->get<std::string>());
  if (known == by_handle_.end() || sessions_.at(known->second).stopping) {
    to_client(json_rpc_error(id, JsonRpcError::invalid_params,
                             "invalid params: " + unknown_session(named->get<std::string>())));
    return std::nullopt;
  }
  return known->second;
}

bool SessionRouter::forward(SessionKey key, const JsonRpcMessage& message, Purpose purpose,
                            const McpRevision& revision, Clock::time_point now,
                            uint64_t gathering) {
  auto it = sessions_.find(key);
  if (it == sessions_.end() || it->second.stopping) {
    to_client(
        json_rpc_error(message.id, kServerBusy,
                       key == kDefaultSession
                           ? "this connection's own session has ended; open_session starts another"
                           : "the session has ended"));
    return false;
  }
  int64_t ours = next_id_++;
  pending_[ours] = {purpose, key, message.id, &revision, gathering};
  it->second.in_flight++;
  it->second.last_active = now;
  send_request(key, ours, message.method, message.params);
  return true;
}

void SessionRouter::send_request(SessionKey key, int64_t id, const std::string& method,
                                 json params) {
  outbox_.to_sessions.emplace_back(key, request_line(id, method, std::move(params)).dump());
}

// -- the session tools ---------------------------------------------------------------------

void SessionRouter::handle_session_tool(const std::string& name, const JsonRpcMessage& message,
                                        const McpRevision& revision, Clock::time_point now) {
  json arguments = message.params.value("arguments", json::object());
  if (arguments.is_null()) arguments = json::object();
  if (!arguments.is_object()) {
    to_client(json_rpc_error(message.id, JsonRpcError::invalid_params,
                             "invalid params: arguments must be an object"));
    return;
  }
  if (message.params.contains("task")) {  // as the session's own tools that are no task say it
    to_client(json_rpc_error(message.id, JsonRpcError::method_not_found,
                             name + " does not run as a task (its taskSupport is forbidden)"));
    return;
  }
  if (name != "close_session" && !arguments.empty()) {
    to_client(json_rpc_error(message.id, JsonRpcError::invalid_params,
                             "invalid params: " + name + " takes no arguments"));
    return;
  }
  if (name == "open_session") {
    open_session(message, revision, now);
  } else if (name == "close_session") {
    auto handle = arguments.find(std::string(kSessionArgument));
    if (handle == arguments.end() || !handle->is_string()) {
      to_client(json_rpc_error(message.id, JsonRpcError::invalid_params,
                               "invalid params: close_session needs the session's handle"));
      return;
    }
    std::optional<SessionKey> key = session_named(arguments, message.id);
    if (!key) return;
    if (*key == kDefaultSession) {
      to_client(json_rpc_error(message.id, JsonRpcError::invalid_params,
                               "invalid params: this connection's own session ends with the "
                               "connection; close_session ends sessions open_session started "
                               "(reset_session gives this one a fresh Python)"));
      return;
    }
    std::string closed = sessions_.at(*key).handle;
    stop_session(*key, "asked", true);
    answer(message.id,
           session_tool_result("closed session " + closed, {{"closed", closed}}, revision),
           revision);
  } else {  // list_sessions
    json listed = json::array();
    for (const auto& [key, session] : sessions_) {
      if (session.stopping) continue;
      double idle = std::chrono::duration<double>(now - session.last_active).count();
      listed.push_back({{"session", session.handle},
                        {"own", key == kDefaultSession},
                        {"idle_seconds", std::round(idle * 10) / 10},
                        {"calls_running", session.in_flight}});
    }
    json structured = {{"sessions", listed}};
    answer(message.id, session_tool_result(listed.dump(), std::move(structured), revision),
           revision);
  }
}

void SessionRouter::open_session(const JsonRpcMessage& message, const McpRevision& revision,
                                 Clock::time_point now) {
  if (live_sessions() >= limits_.max_sessions) {
    to_client(json_rpc_error(message.id, kServerBusy,
                             "session limit reached: " + std::to_string(live_sessions()) +
                                 " sessions are open (--max-sessions " +
                                 std::to_string(limits_.max_sessions) +
                                 "); close_session one first",
                             {{"max_sessions", limits_.max_sessions}}));
    return;
  }
  SessionKey key = next_key_++;
  Session& session = sessions_[key];
  session.handle = mint_();
  session.kernel_id = mint_();
  session.last_active = now;
  session.opener = message.id;
  session.opener_revision = &revision;
  by_handle_[session.handle] = key;
  outbox_.start.push_back({key, session.kernel_id});
  outbox_.audit.emplace_back("mcp_session_open", json{{"session_kernel", session.kernel_id}});
  // Its own handshake, in the client's words when it made one: the same revision and client.
  int64_t ours = next_id_++;
  pending_[ours] = {Purpose::session_init, key, nullptr, &revision, 0};
  session.in_flight++;
  send_request(key, ours, "initialize", initialize_params());
}

json SessionRouter::initialize_params() const {
  if (client_initialize_) return *client_initialize_;
  return {{"protocolVersion", negotiate_mcp_revision(nullptr).version},
          {"capabilities", json::object()},
          {"clientInfo", {{"name", "belljar-router"}, {"version", BELLJAR_VERSION}}}};
}

void SessionRouter::answer_opener(Session& session, std::optional<std::string> failure) {
  if (!session.opener) return;
  json id = *std::exchange(session.opener, std::nullopt);
  if (failure) {
    to_client(json_rpc_error(id, kServerBusy, "the session could not start: " + *failure));
    return;
  }
  const McpRevision& revision = *session.opener_revision;
  answer(id,
         session_tool_result("opened session " + session.handle +
                                 ": pass it as `session` to run_python and the other tools",
                             {{"session", session.handle}}, revision),
         revision);
}

// -- tasks/list: every session's tasks -----------------------------------------------------

void SessionRouter::gather_tasks(const JsonRpcMessage& message, const McpRevision& revision,
                                 Clock::time_point now) {
  uint64_t id = next_gathering_++;
  Gathering& gathering = gatherings_[id];
  gathering.client_id = message.id;
  gathering.revision = &revision;
  JsonRpcMessage asked = message;
  asked.params.erase("cursor");  // one page: at most 64 tasks a session (mcp_tasks.hpp)
  for (auto& [key, session] : sessions_) {
    if (session.stopping || !session.ready) continue;
    gathering.waiting++;
    forward(key, asked, Purpose::tasks_list, revision, now, id);
  }
  finish_gathering(id);
}

void SessionRouter::finish_gathering(uint64_t id) {
  auto it = gatherings_.find(id);
  if (it == gatherings_.end() || it->second.waiting > 0) return;
  answer(it->second.client_id, {{"tasks", std::move(it->second.tasks)}}, *it->second.revision);
  gatherings_.erase(it);
}

void SessionRouter::remember_task(const std::string& id, SessionKey key) {
  // A session keeps at most 64 tasks (mcp_tasks.hpp); its oldest ids past kMaxTasksRemembered
  // are forgotten, so a client making task after task does not grow the router.
  if (!task_sessions_.emplace(id, key).second) return;
  task_order_.push_back(id);
  while (task_order_.size() > kMaxTasksRemembered) {
    task_sessions_.erase(task_order_.front());
    ended_tasks_.erase(task_order_.front());
    task_order_.pop_front();
  }
}

// -- the sessions --------------------------------------------------------------------------

void SessionRouter::from_session(SessionKey key, std::string_view line, Clock::time_point now) {
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return;
  it->second.answered = true;
  std::optional<json> message = parse_session_line(line);
  if (!message) return;
  bool response =
      message->contains("id") && (message->contains("result") || message->contains("error"));
  if (response) {
    answer_response(key, *message, now);
  } else if (message->contains("method") && !message->contains("id")) {
    to_client(*message);  // progress, logging, a task's status: the client's as they are
  }
}

void SessionRouter::answer_response(SessionKey key, const json& response, Clock::time_point now) {
  const json& id = response["id"];
  if (!id.is_number_integer()) return;
  auto it = pending_.find(id.get<int64_t>());
  if (it == pending_.end() || it->second.session != key) return;  // not sent to this session
  Pending pending = it->second;
  pending_.erase(it);
  Session& session = sessions_.at(key);
  if (session.in_flight > 0) session.in_flight--;
  session.last_active = now;
  json answered = response;
  answered["id"] = pending.client_id;
  bool ok = response.contains("result") && response["result"].is_object();
  switch (pending.purpose) {
    case Purpose::forward:
      break;
    case Purpose::initialize:
      if (ok)
        if (auto version = response["result"].find("protocolVersion");
            version != response["result"].end() && version->is_string())
          if (const McpRevision* settled = mcp_revision(version->get<std::string>()))
            revision_ = settled;
      if (ok && answered["result"].value("instructions", json()).is_string())  // and discover's
        answered["result"]["instructions"] =
            answered["result"]["instructions"].get<std::string>() +
            " Each session is its own sandbox: open_session starts another and returns its "
            "handle, which any tool takes as `session`; list_sessions and close_session "
            "manage them.";
      break;
    case Purpose::tools_list:
      if (ok && answered["result"].contains("tools"))
        answered["result"]["tools"] =
            with_session_tools(std::move(answered["result"]["tools"]), *pending.revision);
      break;
    case Purpose::task_call:
      if (ok)
        if (auto task = response["result"].find("task"); task != response["result"].end() &&
                                                         task->is_object() &&
                                                         task->value("taskId", json()).is_string())
          remember_task((*task)["taskId"].get<std::string>(), key);
      break;
    case Purpose::tasks_list: {
      auto gathering = gatherings_.find(pending.gathering);
      if (gathering == gatherings_.end()) return;
      if (ok && response["result"].value("tasks", json()).is_array())
        for (const auto& task : response["result"]["tasks"])
          gathering->second.tasks.push_back(task);
      gathering->second.waiting--;
      finish_gathering(pending.gathering);
      return;
    }
    case Purpose::session_init:
      if (key == kDefaultSession) return;  // a restarted default session's handshake
      if (ok) {
        session.ready = true;
        if (client_initialized_)
          outbox_.to_sessions.emplace_back(
              key, json_rpc_notification("notifications/initialized", json::object()).dump());
        answer_opener(session, std::nullopt);
      } else {
        answer_opener(session, response.value("error", json::object()).value("message", "?"));
        stop_session(key, "its handshake failed", true);
      }
      return;
    case Purpose::idle_probe: {
      session.probing = false;
      // A task running, or finished with a result kept for its ttl (the outside review: an
      // idle-out lost a result the client could still fetch), or a call the client made
      // meanwhile: not idle (the answer moved last_active).
      bool holds_tasks = ok && response["result"].value("tasks", json()).is_array() &&
                         !response["result"]["tasks"].empty();
      if (holds_tasks || session.in_flight > 0) return;
      stop_session(key, "idle", true);
      return;
    }
  }
  to_client(answered);
}

void SessionRouter::session_ended(SessionKey key, const std::string& how, Clock::time_point now) {
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return;
  Session& session = it->second;
  if (key == kDefaultSession && !session.answered && client_open_) default_failed_to_start_ = true;
  answer_opener(session, "its process ended (" + how + ")");
  // What waited on it is answered; its tasks are gone with it.
  for (auto p = pending_.begin(); p != pending_.end();) {
    if (p->second.session != key) {
      ++p;
      continue;
    }
    Pending pending = p->second;
    p = pending_.erase(p);
    if (pending.purpose == Purpose::tasks_list) {
      if (auto g = gatherings_.find(pending.gathering); g != gatherings_.end()) {
        g->second.waiting--;
        finish_gathering(pending.gathering);
      }
    } else if (!pending.client_id.is_null()) {
      to_client(json_rpc_error(pending.client_id, kServerBusy,
                               "the session ended before it answered (" + how + ")"));
    }
  }
  std::string why = session.stopping ? session.stop_reason : how;
  for (auto t = task_sessions_.begin(); t != task_sessions_.end();) {
    if (t->second != key) {
      ++t;
      continue;
    }
    ended_tasks_[t->first] = why;
    t = task_sessions_.erase(t);
  }
  if (!session.stopping)
    outbox_.audit.emplace_back("mcp_session_end",
                               json{{"session_kernel", session.kernel_id}, {"how", how}});
  std::string handle = session.handle;
  by_handle_.erase(handle);
  sessions_.erase(it);
  // The connection's own session ended by itself (its kernel crashed, or was killed): it starts
  // again, as a Jupyter kernel restarts, so the connection keeps its session (the outside
  // review: every call without a handle failed from then on). Three in a minute are a loop.
  if (key == kDefaultSession && client_open_ && !default_failed_to_start_) {
    while (!default_restarts_.empty() && now - default_restarts_.front() > std::chrono::minutes(1))
      default_restarts_.pop_front();
    if (default_restarts_.size() < 3) {
      default_restarts_.push_back(now);
      start_default(handle, now);
      if (client_initialize_) {
        int64_t ours = next_id_++;
        pending_[ours] = {Purpose::session_init, kDefaultSession, nullptr,
                          revision_ ? revision_ : &negotiate_mcp_revision(nullptr), 0};
        sessions_[kDefaultSession].in_flight++;
        send_request(kDefaultSession, ours, "initialize", *client_initialize_);
      }
    }
  }
}

void SessionRouter::stop_session(SessionKey key, const std::string& reason, bool now) {
  auto it = sessions_.find(key);
  if (it == sessions_.end() || it->second.stopping) return;
  it->second.stopping = true;
  it->second.stop_reason = reason;
  outbox_.stop.push_back({key, now});
  outbox_.audit.emplace_back("mcp_session_close",
                             json{{"session_kernel", it->second.kernel_id}, {"reason", reason}});
}

void SessionRouter::client_closed(const std::string& reason) {
  client_open_ = false;
  for (auto& [key, session] : sessions_)
    if (!session.stopping) {
      session.stopping = true;
      session.stop_reason = reason;
      outbox_.stop.push_back({key, false});
      outbox_.audit.emplace_back("mcp_session_close",
                                 json{{"session_kernel", session.kernel_id}, {"reason", reason}});
    }
}

// -- idle sessions -------------------------------------------------------------------------

std::optional<SessionRouter::Clock::time_point> SessionRouter::next_due() const {
  if (limits_.idle_timeout.count() <= 0) return std::nullopt;
  std::optional<Clock::time_point> due;
  for (const auto& [key, session] : sessions_) {
    if (key == kDefaultSession || session.stopping || session.probing || session.in_flight > 0 ||
        !session.ready)
      continue;
    auto at = session.last_active + limits_.idle_timeout;
    if (!due || at < *due) due = at;
  }
  return due;
}

void SessionRouter::on_timers(Clock::time_point now) {
  if (limits_.idle_timeout.count() <= 0) return;
  for (auto& [key, session] : sessions_) {
    if (key == kDefaultSession || session.stopping || session.probing || session.in_flight > 0 ||
        !session.ready || now < session.last_active + limits_.idle_timeout)
      continue;
    // A task may still run a cell with nothing in flight: asked first, where tasks exist.
    const McpRevision& revision = revision_ ? *revision_ : negotiate_mcp_revision(nullptr);
    if (!revision.tasks) {
      stop_session(key, "idle", true);
      continue;
    }
    session.probing = true;
    session.in_flight++;
    int64_t ours = next_id_++;
    pending_[ours] = {Purpose::idle_probe, key, nullptr, &revision, 0};
    send_request(key, ours, "tasks/list", json::object());
  }
}

// -- answers -------------------------------------------------------------------------------

void SessionRouter::answer(const json& id, json result, const McpRevision& revision) {
  if (revision.tagged_results) result["resultType"] = "complete";
  to_client(json_rpc_result(id, std::move(result)));
}

// After the client's input ended too: it reads the answers to what it sent before.
void SessionRouter::to_client(const json& message) {
  outbox_.to_client.push_back(message.dump());
}

}  // namespace belljar
