#include "kernel/mcp_router/session_router.hpp"

#include <cmath>

#include "kernel/mcp_router/session_tools.hpp"
#include "kernel/protocol/bounded_json.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {

// A session's process sent something that is not JSON: nothing of it reaches the client.
std::optional<json> parse_session_line(std::string_view line) {
  std::string why;
  std::optional<json> message = parse_bounded_json(line, &why);
  if (!message || !message->is_object()) return std::nullopt;
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

// A progress token is the client's name for a call's progress: the router keeps it until the
// call (or its task) ends, so its size is bounded (the outside review: 40 MiB tokens held 300 MB
// in the router, and a 17 MiB one overflowed an HTTP stream's queue).
constexpr size_t kMaxProgressToken = 256;

// The progress token a request carries (params._meta.progressToken), if any.
template <typename Json>
Json* progress_token_of(Json& params) {
  if (!params.is_object()) return nullptr;
  auto meta = params.find("_meta");
  if (meta == params.end() || !meta->is_object()) return nullptr;
  auto token = meta->find("progressToken");
  if (token == meta->end() || !(token->is_string() || token->is_number_integer())) return nullptr;
  return &*token;
}

}  // namespace

SessionRouter::SessionRouter(RouterLimits limits, std::function<std::string()> mint)
    : limits_(limits), mint_(std::move(mint)) {}

void SessionRouter::start(Clock::time_point now) {
  clients_[kFirstClient];
  start_own(kFirstClient, mint_(), now);
}

void SessionRouter::add_client(ClientKey key) {
  clients_[key].idles = true;
}

bool SessionRouter::start_own(ClientKey client, const std::string& handle, Clock::time_point now) {
  if (live_sessions() >= limits_.max_sessions) return false;
  SessionKey key = next_key_++;
  Session& session = sessions_[key];
  session.handle = handle;
  session.kernel_id = mint_();
  session.owner = client;
  session.own = true;
  session.last_active = now;
  session.ready = true;  // the client's own initialize reaches it
  by_handle_[session.handle] = key;
  clients_.at(client).own = key;
  outbox_.start.push_back({key, session.kernel_id});
  outbox_.audit.emplace_back("mcp_session_open",
                             json{{"session_kernel", session.kernel_id}, {"own", true}});
  return true;
}

size_t SessionRouter::live_sessions() const {
  size_t live = 0;
  for (const auto& [key, session] : sessions_) live += session.stopping ? 0 : 1;
  return live;
}

std::string SessionRouter::session_limit_reached() const {
  return "session limit reached: " + std::to_string(live_sessions()) +
         " sessions are open (--max-sessions " + std::to_string(limits_.max_sessions) +
         "); close_session one first";
}

// -- the clients ---------------------------------------------------------------------------

void SessionRouter::from_client(Caller caller, std::string_view line, Clock::time_point now) {
  JsonRpcMessage message = parse_json_rpc(line);
  if (!clients_.count(caller.client)) {  // the transport's bug, never a session's harm
    if (message.kind == JsonRpcMessage::Kind::request)
      to_client(caller,
                json_rpc_error(message.id, JsonRpcError::invalid_request, "no such MCP session"));
    return;
  }
  switch (message.kind) {
    case JsonRpcMessage::Kind::invalid:
      to_client(caller, json_rpc_error(message.id, message.error, message.problem));
      return;
    case JsonRpcMessage::Kind::request:
      // A client at work is no idle client: its own session (and with it, over HTTP, the MCP
      // session) stays while it calls tools on the sessions it opened. A ping is no work.
      if (auto& own = clients_[caller.client].own; own && message.method == "tools/call")
        if (auto session = sessions_.find(*own); session != sessions_.end())
          session->second.last_active = now;
      try {
        handle_request(caller, message, now);
      } catch (const std::exception& e) {
        // A bug of ours costs one request, never the sessions.
        to_client(caller, json_rpc_error(message.id, JsonRpcError::internal_error,
                                         std::string("internal error: ") + e.what()));
      }
      return;
    case JsonRpcMessage::Kind::notification:
      handle_notification(caller, message);
      return;
    case JsonRpcMessage::Kind::response:
      return;  // no session sends the client requests
  }
}

void SessionRouter::client_message_too_long(Caller caller, size_t max) {
  to_client(caller, json_rpc_error(
                        nullptr, JsonRpcError::parse_error,
                        "parse error: message larger than " + std::to_string(max >> 20) + " MiB"));
}

const McpRevision& SessionRouter::settled_revision(ClientKey client) const {
  auto it = clients_.find(client);
  if (it != clients_.end() && it->second.revision) return *it->second.revision;
  return negotiate_mcp_revision(nullptr);
}

const McpRevision& SessionRouter::revision_of(Caller caller, const JsonRpcMessage& message) const {
  std::optional<NamedRevision> named = revision_named_in(message.params);
  if (named && named->revision) return *named->revision;
  return settled_revision(caller.client);
}

std::optional<SessionRouter::SessionKey> SessionRouter::own_session(Caller caller, const json& id,
                                                                    Clock::time_point now) {
  Client& client = clients_.at(caller.client);
  if (client.own) return *client.own;
  if (client.lost) {
    to_client(caller, json_rpc_error(
                          id, kServerBusy,
                          "this connection's own session has ended; open_session starts another"));
    return std::nullopt;
  }
  if (!start_own(caller.client, mint_(), now)) {
    to_client(caller, json_rpc_error(id, kServerBusy, session_limit_reached(),
                                     {{"max_sessions", limits_.max_sessions}}));
    return std::nullopt;
  }
  return *client.own;
}

void SessionRouter::handle_request(Caller caller, const JsonRpcMessage& message,
                                   Clock::time_point now) {
  std::optional<NamedRevision> named = revision_named_in(message.params);
  if (named && !named->revision) {
    to_client(caller, unsupported_revision_error(message.id, named->unsupported));
    return;
  }
  const McpRevision& revision = revision_of(caller, message);
  const std::string& method = message.method;
  if (const json* token = progress_token_of(message.params);
      token && token->is_string() &&
      token->get_ref<const std::string&>().size() > kMaxProgressToken) {
    to_client(caller, json_rpc_error(message.id, JsonRpcError::invalid_params,
                                     "invalid params: a progressToken is at most " +
                                         std::to_string(kMaxProgressToken) + " characters"));
    return;
  }
  if (method == "ping") {
    answer(caller, message.id, json::object(), revision);  // the router's own liveness
    return;
  }
  if (method == "tools/call") {
    auto name = message.params.find("name");
    if (name != message.params.end() && name->is_string() &&
        is_session_tool(name->get_ref<const std::string&>())) {
      handle_session_tool(caller, name->get<std::string>(), message, revision, now);
      return;
    }
    static const json no_arguments = json::object();
    auto arguments = message.params.find("arguments");
    const json& given = arguments != message.params.end() ? *arguments : no_arguments;
    std::optional<SessionKey> key = session_named(caller, given, message.id, now);
    if (!key) return;
    JsonRpcMessage sent = message;
    if (sent.params.contains("arguments") && sent.params["arguments"].is_object())
      sent.params["arguments"].erase(std::string(kSessionArgument));
    bool task = message.params.contains("task");
    forward(caller, *key, sent, task ? Purpose::task_call : Purpose::forward, revision, now);
    return;
  }
  if (method == "tasks/list" && revision.tasks) {
    gather_tasks(caller, message, revision, now);
    return;
  }
  if (method.rfind("tasks/", 0) == 0 && method != "tasks/list") {
    // A task is its session's: an id the router never saw, or one of a session this caller
    // does not reach, goes to the caller's own session, which says it knows no such task; one
    // of a session that ended is answered here.
    auto task = message.params.find("taskId");
    if (task != message.params.end() && task->is_string()) {
      const std::string& id = task->get_ref<const std::string&>();
      if (auto ended = ended_tasks_.find(id); ended != ended_tasks_.end()) {
        to_client(caller,
                  json_rpc_error(message.id, JsonRpcError::invalid_params,
                                 "task not found: its session ended (" + ended->second + ")"));
        return;
      }
      if (auto known = task_sessions_.find(id);
          known != task_sessions_.end() && reaches(caller, known->second.session)) {
        forward(caller, known->second.session, message, Purpose::forward, revision, now);
        return;
      }
    }
  }
  // The rest is the caller's own session's: initialize, tools/list, server/discover, and what
  // no session speaks (it answers "method not found").
  std::optional<SessionKey> own = own_session(caller, message.id, now);
  if (!own) return;
  if (method == "initialize") {
    clients_.at(caller.client).initialize = message.params;
    forward(caller, *own, message, Purpose::initialize, revision, now);
  } else if (method == "server/discover") {
    forward(caller, *own, message, Purpose::initialize, revision, now);
  } else if (method == "tools/list") {
    forward(caller, *own, message, Purpose::tools_list, revision, now);
  } else {
    forward(caller, *own, message, Purpose::forward, revision, now);
  }
}

void SessionRouter::handle_notification(Caller caller, const JsonRpcMessage& message) {
  Client& client = clients_.at(caller.client);
  if (message.method == "notifications/initialized") {
    client.initialized = true;
    if (client.own && !sessions_.at(*client.own).stopping)
      outbox_.to_sessions.emplace_back(
          *client.own, dump_json(json_rpc_notification(message.method, message.params)));
    return;
  }
  if (message.method == "notifications/cancelled") {
    // The client names its own id: the session knows the router's.
    auto id = message.params.find("requestId");
    if (id == message.params.end()) return;
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      const Pending& pending = it->second;
      if (pending.client_id.is_null() || pending.client_id != *id ||
          pending.caller.client != caller.client)
        continue;
      if (pending.purpose == Purpose::tasks_list) return;  // answered from what is gathered
      json params = message.params;
      params["requestId"] = it->first;
      outbox_.to_sessions.emplace_back(pending.session,
                                       dump_json(json_rpc_notification(message.method, params)));
      // A cancelled call is never answered: it is no longer in flight, and its id may be used
      // again (the outside review: a reused id's cancel reached the stale call, and a session
      // with cancelled calls never idled out).
      if (auto session = sessions_.find(pending.session);
          session != sessions_.end() && session->second.in_flight > 0)
        session->second.in_flight--;
      if (pending.caller.exchange != 0) outbox_.dropped.push_back(pending.caller);
      progress_.erase(it->first);
      pending_.erase(it);
      return;
    }
    return;
  }
  // Anything else is the caller's own session's to ignore or act on.
  if (client.own && !sessions_.at(*client.own).stopping)
    outbox_.to_sessions.emplace_back(
        *client.own, dump_json(json_rpc_notification(message.method, message.params)));
}

void SessionRouter::exchange_closed(Caller caller) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    const Pending& pending = it->second;
    if (!(pending.caller == caller) || pending.client_id.is_null()) {
      ++it;
      continue;
    }
    if (pending.purpose != Purpose::tasks_list && pending.purpose != Purpose::session_init) {
      outbox_.to_sessions.emplace_back(
          pending.session, dump_json(json_rpc_notification(
                               "notifications/cancelled",
                               {{"requestId", it->first}, {"reason", "the client went away"}})));
    }
    if (pending.purpose == Purpose::tasks_list) {
      if (auto g = gatherings_.find(pending.gathering); g != gatherings_.end())
        gatherings_.erase(g);
    }
    if (auto session = sessions_.find(pending.session);
        session != sessions_.end() && session->second.in_flight > 0)
      session->second.in_flight--;
    progress_.erase(it->first);
    it = pending_.erase(it);
  }
  // An open_session whose asker left: the session starts all the same (its handle is lost
  // with the answer, and it idles out).
  for (auto& [key, session] : sessions_)
    if (session.opener && session.opener_caller == caller) session.opener.reset();
}

bool SessionRouter::reaches(Caller caller, SessionKey key) const {
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return false;
  return !it->second.own || it->second.owner == caller.client;
}

std::optional<SessionRouter::SessionKey> SessionRouter::session_named(Caller caller,
                                                                      const json& arguments,
                                                                      const json& id,
                                                                      Clock::time_point now) {
  auto named =
      arguments.is_object() ? arguments.find(std::string(kSessionArgument)) : arguments.end();
  if (!arguments.is_object() || named == arguments.end() || named->is_null())
    return own_session(caller, id, now);
  if (!named->is_string()) {
    to_client(caller, json_rpc_error(id, JsonRpcError::invalid_params,
                                     "invalid params: session is a handle (a string) "
                                     "open_session returned"));
    return std::nullopt;
  }
  auto known = by_handle_.find(named->get<std::string>());
  if (known == by_handle_.end() || sessions_.at(known->second).stopping ||
      !reaches(caller, known->second)) {
    to_client(caller,
              json_rpc_error(id, JsonRpcError::invalid_params,
                             "invalid params: " + unknown_session(named->get<std::string>())));
    return std::nullopt;
  }
  return known->second;
}

bool SessionRouter::forward(Caller caller, SessionKey key, const JsonRpcMessage& message,
                            Purpose purpose, const McpRevision& revision, Clock::time_point now,
                            uint64_t gathering) {
  auto it = sessions_.find(key);
  if (it == sessions_.end() || it->second.stopping) {
    to_client(caller,
              json_rpc_error(message.id, kServerBusy,
                             it != sessions_.end() && it->second.own
                                 ? "this connection's own session has ended; open_session starts "
                                   "another"
                                 : "the session has ended"));
    return false;
  }
  int64_t ours = next_id_++;
  pending_[ours] = {purpose, key, caller, message.id, &revision, gathering};
  it->second.in_flight++;
  it->second.last_active = now;
  json params = message.params;
  // The client's progress token becomes the router's id: two clients may name the same one,
  // and the session's progress must reach the caller that asked for it.
  if (json* token = progress_token_of(params)) {
    remember_progress(ours, {caller, *token});
    *token = ours;
  }
  send_request(key, ours, message.method, std::move(params));
  return true;
}

void SessionRouter::send_request(SessionKey key, int64_t id, const std::string& method,
                                 json params) {
  outbox_.to_sessions.emplace_back(key, dump_json(request_line(id, method, std::move(params))));
}

// -- the session tools ---------------------------------------------------------------------

void SessionRouter::handle_session_tool(Caller caller, const std::string& name,
                                        const JsonRpcMessage& message, const McpRevision& revision,
                                        Clock::time_point now) {
  json arguments = message.params.value("arguments", json::object());
  if (arguments.is_null()) arguments = json::object();
  if (!arguments.is_object()) {
    to_client(caller, json_rpc_error(message.id, JsonRpcError::invalid_params,
                                     "invalid params: arguments must be an object"));
    return;
  }
  if (message.params.contains("task")) {  // as the session's own tools that are no task say it
    to_client(caller,
              json_rpc_error(message.id, JsonRpcError::method_not_found,
                             name + " does not run as a task (its taskSupport is forbidden)"));
    return;
  }
  if (name != "close_session" && !arguments.empty()) {
    to_client(caller, json_rpc_error(message.id, JsonRpcError::invalid_params,
                                     "invalid params: " + name + " takes no arguments"));
    return;
  }
  if (name == "open_session") {
    open_session(caller, message, revision, now);
  } else if (name == "close_session") {
    auto handle = arguments.find(std::string(kSessionArgument));
    if (handle == arguments.end() || !handle->is_string()) {
      to_client(caller, json_rpc_error(message.id, JsonRpcError::invalid_params,
                                       "invalid params: close_session needs the session's handle"));
      return;
    }
    std::optional<SessionKey> key = session_named(caller, arguments, message.id, now);
    if (!key) return;
    if (sessions_.at(*key).own) {
      to_client(caller, json_rpc_error(message.id, JsonRpcError::invalid_params,
                                       "invalid params: this connection's own session ends with "
                                       "the connection; close_session ends sessions open_session "
                                       "started (reset_session gives this one a fresh Python)"));
      return;
    }
    std::string closed = sessions_.at(*key).handle;
    stop_session(*key, "asked", true);
    answer(caller, message.id,
           session_tool_result("closed session " + closed, {{"closed", closed}}, revision),
           revision);
  } else {  // list_sessions: those open_session made, and the caller's own
    json listed = json::array();
    for (const auto& [key, session] : sessions_) {
      if (session.stopping || !reaches(caller, key)) continue;
      double idle = std::chrono::duration<double>(now - session.last_active).count();
      listed.push_back({{"session", session.handle},
                        {"own", session.own},
                        {"idle_seconds", std::round(idle * 10) / 10},
                        {"calls_running", session.in_flight}});
    }
    json structured = {{"sessions", listed}};
    answer(caller, message.id,
           session_tool_result(dump_json(listed), std::move(structured), revision), revision);
  }
}

void SessionRouter::open_session(Caller caller, const JsonRpcMessage& message,
                                 const McpRevision& revision, Clock::time_point now) {
  if (live_sessions() >= limits_.max_sessions) {
    to_client(caller, json_rpc_error(message.id, kServerBusy, session_limit_reached(),
                                     {{"max_sessions", limits_.max_sessions}}));
    return;
  }
  SessionKey key = next_key_++;
  Session& session = sessions_[key];
  session.handle = mint_();
  session.kernel_id = mint_();
  session.owner = caller.client;
  session.last_active = now;
  session.opener = message.id;
  session.opener_caller = caller;
  session.opener_revision = &revision;
  by_handle_[session.handle] = key;
  outbox_.start.push_back({key, session.kernel_id});
  outbox_.audit.emplace_back("mcp_session_open", json{{"session_kernel", session.kernel_id}});
  // Its own handshake, in the client's words when it made one: the same revision and client.
  int64_t ours = next_id_++;
  pending_[ours] = {Purpose::session_init, key, caller, nullptr, &revision, 0};
  session.in_flight++;
  send_request(key, ours, "initialize", initialize_params(caller.client));
}

json SessionRouter::initialize_params(ClientKey client) const {
  auto it = clients_.find(client);
  if (it != clients_.end() && it->second.initialize) return *it->second.initialize;
  return {{"protocolVersion", negotiate_mcp_revision(nullptr).version},
          {"capabilities", json::object()},
          {"clientInfo", {{"name", "belljar-router"}, {"version", BELLJAR_VERSION}}}};
}

void SessionRouter::answer_opener(Session& session, std::optional<std::string> failure) {
  if (!session.opener) return;
  json id = *std::exchange(session.opener, std::nullopt);
  if (failure) {
    to_client(session.opener_caller,
              json_rpc_error(id, kServerBusy, "the session could not start: " + *failure));
    return;
  }
  const McpRevision& revision = *session.opener_revision;
  answer(session.opener_caller, id,
         session_tool_result("opened session " + session.handle +
                                 ": pass it as `session` to run_python and the other tools",
                             {{"session", session.handle}}, revision),
         revision);
}

// -- tasks/list: the tasks of every session the caller reaches -----------------------------

void SessionRouter::gather_tasks(Caller caller, const JsonRpcMessage& message,
                                 const McpRevision& revision, Clock::time_point now) {
  uint64_t id = next_gathering_++;
  Gathering& gathering = gatherings_[id];
  gathering.caller = caller;
  gathering.client_id = message.id;
  gathering.revision = &revision;
  JsonRpcMessage asked = message;
  asked.params.erase("cursor");  // one page: at most 64 tasks a session (mcp_tasks.hpp)
  for (auto& [key, session] : sessions_) {
    if (session.stopping || !session.ready || !reaches(caller, key)) continue;
    gathering.waiting++;
    forward(caller, key, asked, Purpose::tasks_list, revision, now, id);
  }
  finish_gathering(id);
}

void SessionRouter::finish_gathering(uint64_t id) {
  auto it = gatherings_.find(id);
  if (it == gatherings_.end() || it->second.waiting > 0) return;
  answer(it->second.caller, it->second.client_id, {{"tasks", std::move(it->second.tasks)}},
         *it->second.revision);
  gatherings_.erase(it);
}

void SessionRouter::remember_task(const std::string& id, TaskRoute route) {
  // A session keeps at most 64 tasks (mcp_tasks.hpp); its oldest ids past kMaxTasksRemembered
  // are forgotten, so a client making task after task does not grow the router.
  if (!task_sessions_.emplace(id, route).second) return;
  task_order_.push_back(id);
  while (task_order_.size() > kMaxTasksRemembered) {
    task_sessions_.erase(task_order_.front());
    ended_tasks_.erase(task_order_.front());
    task_order_.pop_front();
  }
}

void SessionRouter::remember_progress(int64_t ours, ProgressRoute route) {
  // A call's token is forgotten with its answer; a task's lives on with the task, the oldest
  // past kMaxTasksRemembered forgotten.
  progress_[ours] = std::move(route);
  progress_order_.push_back(ours);
  while (progress_order_.size() > kMaxTasksRemembered) {
    progress_.erase(progress_order_.front());
    progress_order_.pop_front();
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
    route_notification(key, std::move(*message));
  }
}

void SessionRouter::route_notification(SessionKey key, json message) {
  const Session& session = sessions_.at(key);
  json& params = message["params"];
  if (params.is_object() && params.contains("progressToken")) {
    // Progress reaches the caller that asked for it, under its own token; a token the router
    // never gave this session is dropped.
    const json& token = params["progressToken"];
    if (!token.is_number_integer()) return;
    auto route = progress_.find(token.get<int64_t>());
    if (route == progress_.end()) return;
    auto pending = pending_.find(route->first);
    if (pending != pending_.end() && pending->second.session != key) return;
    params["progressToken"] = route->second.token;
    to_client(route->second.caller, message);
    return;
  }
  if (params.is_object() && params.value("taskId", json()).is_string()) {
    auto task = task_sessions_.find(params["taskId"].get<std::string>());
    if (task == task_sessions_.end() || task->second.session != key) return;
    to_client({task->second.client, 0}, message);
    return;
  }
  if (message.value("method", "") == "notifications/tasks/status" ||
      (params.is_object() && params.contains("taskId")))
    return;                                // a task the router does not know: nobody's
  to_client({session.owner, 0}, message);  // logging and the like: its owner's
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
  if (pending.purpose != Purpose::task_call) progress_.erase(id.get<int64_t>());
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
            if (auto client = clients_.find(pending.caller.client); client != clients_.end())
              client->second.revision = settled;
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
      if (ok) {
        if (auto task = response["result"].find("task"); task != response["result"].end() &&
                                                         task->is_object() &&
                                                         task->value("taskId", json()).is_string())
          remember_task((*task)["taskId"].get<std::string>(), {key, pending.caller.client});
        // Its progress outlives the call: later notifications go to the client's channel.
        if (auto route = progress_.find(id.get<int64_t>()); route != progress_.end())
          route->second.caller.exchange = 0;
      } else {
        progress_.erase(id.get<int64_t>());
      }
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
      if (session.own) return;  // a restarted own session's handshake
      if (ok) {
        session.ready = true;
        auto client = clients_.find(session.owner);
        if (client != clients_.end() && client->second.initialized)
          outbox_.to_sessions.emplace_back(
              key, dump_json(json_rpc_notification("notifications/initialized", json::object())));
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
  to_client(pending.caller, answered);
}

void SessionRouter::session_ended(SessionKey key, const std::string& how, Clock::time_point now) {
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return;
  Session& session = it->second;
  if (key == kFirstSession && !session.answered && !shut_down_) first_failed_to_start_ = true;
  answer_opener(session, "its process ended (" + how + ")");
  // What waited on it is answered; its tasks are gone with it.
  for (auto p = pending_.begin(); p != pending_.end();) {
    if (p->second.session != key) {
      ++p;
      continue;
    }
    Pending pending = p->second;
    progress_.erase(p->first);
    p = pending_.erase(p);
    if (pending.purpose == Purpose::tasks_list) {
      if (auto g = gatherings_.find(pending.gathering); g != gatherings_.end()) {
        g->second.waiting--;
        finish_gathering(pending.gathering);
      }
    } else if (!pending.client_id.is_null()) {
      to_client(pending.caller,
                json_rpc_error(pending.client_id, kServerBusy,
                               "the session ended before it answered (" + how + ")"));
    }
  }
  std::string why = session.stopping ? session.stop_reason : how;
  for (auto t = task_sessions_.begin(); t != task_sessions_.end();) {
    if (t->second.session != key) {
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
  bool own = session.own, stopped = session.stopping;
  ClientKey owner = session.owner;
  by_handle_.erase(handle);
  sessions_.erase(it);
  if (!own) return;
  auto client = clients_.find(owner);
  if (client == clients_.end()) return;
  client->second.own.reset();
  // A client's own session ended by itself (its kernel crashed, or was killed): it starts
  // again, as a Jupyter kernel restarts, so the connection keeps its session (the outside
  // review: every call without a handle failed from then on). Three in a minute are a loop.
  auto& restarts = client->second.restarts;
  while (!restarts.empty() && now - restarts.front() > std::chrono::minutes(1))
    restarts.pop_front();
  if (stopped || shut_down_ || first_failed_to_start_ || restarts.size() >= 3 ||
      !start_own(owner, handle, now)) {
    client_lost(owner);
    return;
  }
  restarts.push_back(now);
  if (client->second.initialize) {
    SessionKey restarted = *client->second.own;
    int64_t ours = next_id_++;
    pending_[ours] = {Purpose::session_init,    restarted, {owner, 0}, nullptr,
                      &settled_revision(owner), 0};
    sessions_.at(restarted).in_flight++;
    send_request(restarted, ours, "initialize", *client->second.initialize);
  }
}

void SessionRouter::client_lost(ClientKey key) {
  auto client = clients_.find(key);
  if (client == clients_.end()) return;
  if (client->second.idles) {  // an HTTP client: its Mcp-Session-Id is no more
    clients_.erase(client);
    outbox_.ended_clients.push_back(key);
  } else {
    client->second.lost = true;
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

void SessionRouter::client_closed(ClientKey key, const std::string& reason) {
  auto client = clients_.find(key);
  if (client == clients_.end()) return;
  std::optional<SessionKey> own = client->second.own;
  client->second.idles = true;  // forgotten once its own session ended
  if (own) {
    stop_session(*own, reason, false);
  } else {
    client_lost(key);
  }
}

void SessionRouter::shutdown(const std::string& reason) {
  shut_down_ = true;
  for (auto& [key, session] : sessions_) stop_session(key, reason, false);
}

// -- idle sessions -------------------------------------------------------------------------

std::optional<SessionRouter::Clock::time_point> SessionRouter::next_due() const {
  if (limits_.idle_timeout.count() <= 0) return std::nullopt;
  std::optional<Clock::time_point> due;
  for (const auto& [key, session] : sessions_) {
    if (!idles(session)) continue;
    auto at = session.last_active + limits_.idle_timeout;
    if (!due || at < *due) due = at;
  }
  return due;
}

bool SessionRouter::idles(const Session& session) const {
  if (session.stopping || session.probing || session.in_flight > 0 || !session.ready) return false;
  if (!session.own) return true;
  auto client = clients_.find(session.owner);
  return client != clients_.end() && client->second.idles;
}

void SessionRouter::on_timers(Clock::time_point now) {
  if (limits_.idle_timeout.count() <= 0) return;
  for (auto& [key, session] : sessions_) {
    if (!idles(session) || now < session.last_active + limits_.idle_timeout) continue;
    // A task may still run a cell with nothing in flight: asked first, where tasks exist.
    const McpRevision& revision = settled_revision(session.owner);
    if (!revision.tasks) {
      stop_session(key, "idle", true);
      continue;
    }
    session.probing = true;
    session.in_flight++;
    int64_t ours = next_id_++;
    pending_[ours] = {Purpose::idle_probe, key, {}, nullptr, &revision, 0};
    send_request(key, ours, "tasks/list", json::object());
  }
}

// -- answers -------------------------------------------------------------------------------

void SessionRouter::answer(Caller caller, const json& id, json result,
                           const McpRevision& revision) {
  if (revision.tagged_results) result["resultType"] = "complete";
  to_client(caller, json_rpc_result(id, std::move(result)));
}

void SessionRouter::to_client(Caller caller, const json& message) {
  // Replacing what is not UTF-8 (a handle cut inside a character, a session's bytes): a
  // message that cannot be serialised would otherwise cost its client the answer.
  outbox_.to_client.emplace_back(caller, dump_json(message));
}

}  // namespace belljar
