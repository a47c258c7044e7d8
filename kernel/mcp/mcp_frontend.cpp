#include "kernel/mcp/mcp_frontend.hpp"

#include <fcntl.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "kernel/mcp/mcp_tools.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/buffer_room.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {
constexpr size_t kReadChunk = 1u << 20;
constexpr size_t kProgressTail = 500;  // bytes of recent output in a progress message
constexpr auto kProgressEvery = std::chrono::seconds(1);

bool id_matches(const json& a, const json& b) {
  if (a.is_number_integer() && b.is_number_integer())
    return a.get<long long>() == b.get<long long>();
  return a == b;
}
}  // namespace

McpFrontend::McpFrontend(Kernel& kernel, Policy policy, int in_fd, int out_fd)
    : kernel_(kernel),
      policy_(std::move(policy)),
      in_fd_(in_fd),
      out_fd_(out_fd),
      lines_(kMaxMcpLine),
      log_(10) {
  // Non-blocking stdout: a client that stops reading must not stall the reactor (and with it
  // interrupts and limits). The flags are the open file's, shared with our parent: restored.
  out_flags_ = ::fcntl(out_fd_, F_GETFL);
  if (out_flags_ != -1) ::fcntl(out_fd_, F_SETFL, out_flags_ | O_NONBLOCK);
}

McpFrontend::~McpFrontend() {
  if (out_flags_ != -1) ::fcntl(out_fd_, F_SETFL, out_flags_);
}

void McpFrontend::add_poll_items(std::vector<zmq::pollitem_t>& items) {
  items.push_back({nullptr, input_open_ ? in_fd_ : -1, ZMQ_POLLIN, 0});
  items.push_back({nullptr, outbox_.empty() ? -1 : out_fd_, ZMQ_POLLOUT, 0});
}

void McpFrontend::handle(const zmq::pollitem_t* items, Kernel&) {
  if (items[1].revents & (ZMQ_POLLOUT | ZMQ_POLLERR)) flush_output();
  if (items[0].revents & (ZMQ_POLLIN | ZMQ_POLLERR)) read_input();
  if (start_due_) start_next();
  send_progress(Clock::now());
  stop_if_done();
}

std::optional<std::chrono::steady_clock::time_point> McpFrontend::next_wakeup() const {
  if (start_due_) return Clock::now();
  if (running_ && running_->progress_token) return running_->next_progress;
  return std::nullopt;
}

// -- input ---------------------------------------------------------------------------------

void McpFrontend::read_input() {
  // One read per wake-up: poll said it won't block, and stdin keeps its blocking mode.
  std::string chunk(kReadChunk, '\0');
  ssize_t n = ::read(in_fd_, chunk.data(), chunk.size());
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    // The client closed stdin: finish what it asked for, then exit (MCP's stdio shutdown).
    input_open_ = false;
    std::string last = lines_.finish();
    if (!last.empty()) handle_line(last);
    return;
  }
  bool oversized = lines_.feed(std::string_view(chunk.data(), static_cast<size_t>(n)),
                               [this](std::string_view line) { handle_line(line); });
  if (oversized)
    send(json_rpc_error(
        nullptr, JsonRpcError::parse_error,
        "parse error: message larger than " + std::to_string(kMaxMcpLine >> 20) + " MiB"));
}

void McpFrontend::handle_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  JsonRpcMessage message = parse_json_rpc(line);
  try {
    switch (message.kind) {
      case JsonRpcMessage::Kind::invalid:
        log_.log("bad MCP message", message.problem);
        send(json_rpc_error(message.id, message.error, message.problem));
        break;
      case JsonRpcMessage::Kind::request:
        handle_request(message);
        break;
      case JsonRpcMessage::Kind::notification:
        handle_notification(message);
        break;
      case JsonRpcMessage::Kind::response:
        break;  // this server sends no requests
    }
  } catch (const std::exception& e) {
    // A bug of ours must cost one request, never the session.
    log_line(std::string("mcp: internal error: ") + e.what());
    if (message.kind == JsonRpcMessage::Kind::request)
      send(json_rpc_error(message.id, JsonRpcError::internal_error,
                          std::string("internal error: ") + e.what()));
  }
}

void McpFrontend::handle_request(const JsonRpcMessage& message) {
  const std::string& method = message.method;
  const json& params = message.params;
  std::optional<NamedRevision> named = revision_named_in(params);
  if (named && !named->revision) {
    send(unsupported_revision_error(message.id, named->unsupported));
    return;
  }
  const McpRevision& revision = named       ? *named->revision
                                : revision_ ? *revision_
                                            : negotiate_mcp_revision(nullptr);
  if (method == "initialize") {
    auto requested = params.find("protocolVersion");
    if (requested == params.end() || !requested->is_string()) {
      send(json_rpc_error(message.id, JsonRpcError::invalid_params,
                          "invalid params: initialize needs protocolVersion"));
      return;
    }
    revision_ = &negotiate_mcp_revision(*requested);
    json capabilities = {{"tools", {{"listChanged", false}}}};
    if (revision_->tasks)
      capabilities["tasks"] = {{"list", json::object()},
                               {"cancel", json::object()},
                               {"requests", {{"tools", {{"call", json::object()}}}}}};
    send(json_rpc_result(message.id, {{"protocolVersion", revision_->version},
                                      {"capabilities", std::move(capabilities)},
                                      {"serverInfo", mcp_server_info(*revision_)},
                                      {"instructions", mcp_server_instructions(policy_)}}));
  } else if (method == "server/discover") {
    json result = {{"supportedVersions", mcp_versions()},
                   {"capabilities", {{"tools", {{"listChanged", false}}}}},
                   {"instructions", mcp_server_instructions(policy_)},
                   {"_meta", {{"io.modelcontextprotocol/serverInfo", mcp_server_info(revision)}}}};
    answer(message.id, std::move(result), *mcp_revision("2026-07-28"), true);
  } else if (method == "ping") {
    answer(message.id, json::object(), revision);
  } else if (method == "tools/list") {
    answer(message.id, {{"tools", mcp_tool_list(policy_, revision)}}, revision, true);
  } else if (method == "tools/call") {
    queue_tool_call(message, revision);
  } else if (revision.tasks && method.rfind("tasks/", 0) == 0) {
    handle_task_request(message, revision);
  } else {
    send(json_rpc_error(message.id, JsonRpcError::method_not_found, "method not found: " + method));
  }
}

// A result as `revision` shapes it: from 2026-07-28 each carries its resultType, and a result a
// client may cache says for how long (not at all: tools and limits follow the policy) and for
// whom.
void McpFrontend::answer(const json& id, json result, const McpRevision& revision, bool cacheable) {
  if (revision.tagged_results) {
    result["resultType"] = "complete";
    if (cacheable) {
      result["ttlMs"] = 0;
      result["cacheScope"] = "private";
    }
  }
  send(json_rpc_result(id, std::move(result)));
}

void McpFrontend::handle_notification(const JsonRpcMessage& message) {
  if (message.method == "notifications/cancelled") {
    auto id = message.params.find("requestId");
    if (id != message.params.end() && (id->is_string() || id->is_number_integer())) cancel(*id);
  }
  // notifications/initialized and anything else: nothing to do.
}

void McpFrontend::queue_tool_call(const JsonRpcMessage& message, const McpRevision& revision) {
  const json& params = message.params;
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    send(json_rpc_error(message.id, JsonRpcError::invalid_params,
                        "invalid params: tools/call needs a tool name"));
    return;
  }
  std::optional<McpTool> tool = mcp_tool(name->get_ref<const std::string&>());
  if (!tool) {
    send(json_rpc_error(message.id, JsonRpcError::invalid_params,
                        "invalid params: unknown tool " + name->get<std::string>()));
    return;
  }
  json arguments = json::object();
  if (auto given = params.find("arguments"); given != params.end() && !given->is_null())
    arguments = *given;
  if (auto problem = check_tool_arguments(*tool, arguments)) {
    send(json_rpc_error(message.id, JsonRpcError::invalid_params, "invalid params: " + *problem));
    return;
  }
  ToolCall call;
  call.id = message.id;
  call.revision = &revision;
  call.tool = *tool;
  if (auto task = params.find("task"); revision.tasks && task != params.end()) {
    if (!task->is_object()) {
      send(json_rpc_error(message.id, JsonRpcError::invalid_params,
                          "invalid params: task must be an object"));
      return;
    }
    if (*tool != McpTool::run_python) {
      send(json_rpc_error(message.id, JsonRpcError::method_not_found,
                          std::string(tool_name(*tool)) +
                              " does not run as a task (its taskSupport is forbidden)"));
      return;
    }
    call.task = tasks_.create(task->value("ttl", json()), McpTasks::Clock::now());
    if (!call.task) {
      send(json_rpc_error(message.id, JsonRpcError::invalid_request,
                          std::to_string(McpTasks::kMaxTasks) +
                              " tasks are working: wait for one to end, or cancel one"));
      return;
    }
  }
  call.arguments = std::move(arguments);
  if (auto meta = params.find("_meta"); meta != params.end() && meta->is_object()) {
    auto token = meta->find("progressToken");
    if (token != meta->end() && (token->is_string() || token->is_number_integer()))
      call.progress_token = *token;
  }
  if (call.task) answer(call.id, {{"task", tasks_.describe(*call.task)}}, revision);
  waiting_.push_back(std::move(call));
  start_due_ = true;
}

void McpFrontend::handle_task_request(const JsonRpcMessage& message, const McpRevision& revision) {
  const std::string& method = message.method;
  if (method == "tasks/list") {
    tasks_.expire(McpTasks::Clock::now());
    answer(message.id, {{"tasks", tasks_.describe_all()}}, revision);
    return;
  }
  auto id = message.params.find("taskId");
  if (id == message.params.end() || !id->is_string()) {
    send(json_rpc_error(message.id, JsonRpcError::invalid_params,
                        "invalid params: " + method + " needs a taskId"));
    return;
  }
  const std::string& task = id->get_ref<const std::string&>();
  if (!tasks_.known(task)) {
    // An id never issued, a guess, or one past its ttl: all the same here.
    send(json_rpc_error(message.id, JsonRpcError::invalid_params, "task not found: " + task));
    return;
  }
  if (method == "tasks/get") {
    if (running_ && running_->task == task)
      tasks_.progress(task, progress_text(*running_, Clock::now()), McpTasks::Clock::now());
    answer(message.id, tasks_.describe(task), revision);
  } else if (method == "tasks/result") {
    if (tasks_.status(task) == TaskStatus::working)
      result_waits_.push_back({message.id, task, &revision});
    else
      answer_task_result(message.id, task, revision);
  } else if (method == "tasks/cancel") {
    cancel_task(message, revision, task);
  } else {
    send(json_rpc_error(message.id, JsonRpcError::method_not_found, "method not found: " + method));
  }
}

void McpFrontend::cancel_task(const JsonRpcMessage& message, const McpRevision& revision,
                              const std::string& task) {
  TaskStatus status = *tasks_.status(task);
  if (status != TaskStatus::working) {
    send(json_rpc_error(message.id, JsonRpcError::invalid_params,
                        "task " + task + " has already ended (" + task_status_name(status) +
                            "): nothing to cancel"));
    return;
  }
  if (running_ && running_->task == task) {
    // KeyboardInterrupt in the cell; the session lives on. Its reply is not the task's result.
    running_->cancelled = true;
    kernel_.interrupt_cell();
  } else {
    std::erase_if(waiting_, [&](const ToolCall& call) { return call.task == task; });
  }
  tasks_.finish(task, TaskStatus::cancelled, nullptr, McpTasks::Clock::now());
  answer(message.id, tasks_.describe(task), revision);
  answer_result_waits(task);
}

void McpFrontend::answer_task_result(const json& id, const std::string& task,
                                     const McpRevision& revision) {
  const json* result = tasks_.result(task);
  if (!result) {
    send(json_rpc_error(id, JsonRpcError::invalid_params,
                        "task " + task + " was cancelled: it has no result"));
    return;
  }
  json payload = *result;
  payload["_meta"]["io.modelcontextprotocol/related-task"] = {{"taskId", task}};
  answer(id, std::move(payload), revision);
}

void McpFrontend::answer_result_waits(const std::string& task) {
  std::vector<ResultWait> ready;
  std::erase_if(result_waits_, [&](ResultWait& wait) {
    if (wait.task != task) return false;
    ready.push_back(std::move(wait));
    return true;
  });
  for (const auto& wait : ready) answer_task_result(wait.id, wait.task, *wait.revision);
}

void McpFrontend::cancel(const json& request_id) {
  // A task's tools/call was answered with the task: tasks/cancel is how it is cancelled.
  if (running_ && !running_->task && id_matches(running_->id, request_id)) {
    if (running_->cancelled) return;
    running_->cancelled = true;  // no response is sent for it (MCP cancellation)
    if (running_->tool != McpTool::reset_session) kernel_.interrupt_cell();
    return;
  }
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
    if (!it->task && id_matches(it->id, request_id)) {
      waiting_.erase(it);
      return;
    }
}

// -- tool calls ----------------------------------------------------------------------------

void McpFrontend::start_next() {
  start_due_ = false;
  if (running_ || waiting_.empty() || kernel_.shutting_down()) return;
  // A client that does not read: the next call waits until what is queued for it drains, so
  // asking for one large file after another does not pile the answers up here.
  if (outbox_.size() > kMaxUnreadOutput) return;
  running_ = std::move(waiting_.front());
  waiting_.pop_front();
  ToolCall& call = *running_;
  call.started = Clock::now();
  call.next_progress = call.started + kProgressEvery;
  switch (call.tool) {
    case McpTool::run_python:
      submit_execute(call, call.arguments["code"].get<std::string>(), false, json::object());
      return;
    case McpTool::reset_session:
      kernel_.restart_worker("reset_session from the MCP client");
      // Answered once the fresh worker has run an empty cell: then it is really ready.
      submit_execute(call, "", true, json::object());
      return;
    case McpTool::checkpoint:
    case McpTool::rollback:
    case McpTool::list_checkpoints:
    case McpTool::drop_checkpoint:
      // The magic's cell, silent: the session's execution count does not move for it.
      submit_execute(call, checkpoint_cell(call.tool, call.arguments), true, json::object());
      return;
    case McpTool::list_files:
    case McpTool::read_file:
    case McpTool::write_file: {
      // The workspace as the host holds it, answered here: never by code in the session.
      ToolCall done = std::move(*running_);
      running_.reset();
      start_due_ = true;
      answer(done.id,
             for_client(file_tool_result(done.tool, done.arguments, policy_), *done.revision),
             *done.revision);
      return;
    }
  }
}

void McpFrontend::submit_execute(ToolCall& call, const std::string& code, bool silent,
                                 json user_expressions) {
  WireMessage message;
  message.header = make_header("execute_request", kernel_.session_id());
  message.header["username"] = "mcp";
  message.content = {{"code", code},
                     {"silent", silent},
                     {"store_history", !silent},
                     {"user_expressions", std::move(user_expressions)},
                     {"allow_stdin", false},
                     {"stop_on_error", false}};
  if (auto timeout = call.arguments.find("timeout_seconds"); timeout != call.arguments.end())
    message.metadata = {{"belljar", {{"timeout_seconds", *timeout}}}};
  call.request_id = message.id();
  // The kernel may answer at once (no sandbox could be started): `call` is gone after this.
  kernel_.submit_shell(std::move(message));
}

void McpFrontend::reply(Channel, const WireMessage& parent, const std::string& type, json content,
                        json metadata) {
  if (type != "execute_reply" || !running_ || parent.id() != running_->request_id) return;
  finish_call(content, metadata);
}

void McpFrontend::publish(const std::string& type, json content, const WireMessage* parent) {
  if (!parent || !running_ || parent->id() != running_->request_id) return;
  running_->record.add(type, content);
}

void McpFrontend::request_input(const WireMessage&, json) {
  // Never asked: tool calls go in with allow_stdin false, so input() raises EOFError.
}

void McpFrontend::finish_call(const json& reply_content, const json& reply_metadata) {
  ToolCall call = std::move(*running_);
  running_.reset();
  start_due_ = true;  // the next call starts on the reactor's next turn, not inside this one
  if (call.cancelled) return;
  call.record.finish(reply_content, reply_metadata);
  json result;
  try {
    if (call.tool == McpTool::run_python)
      result = run_python_result(call.record);
    else if (is_checkpoint_tool(call.tool))
      result = checkpoint_result(call.tool, call.record);
    else
      result = reset_session_result(call.record);
  } catch (const std::exception& e) {
    std::string name(tool_name(call.tool));
    log_line("mcp: building the result of " + name + ": " + e.what());
    result = tool_error_result(name + " failed: internal error");
  }
  result = for_client(std::move(result), *call.revision);
  if (call.task) {
    tasks_.finish(*call.task, TaskStatus::completed, std::move(result), McpTasks::Clock::now());
    answer_result_waits(*call.task);
    return;
  }
  answer(call.id, std::move(result), *call.revision);
}

json McpFrontend::for_client(json result, const McpRevision& revision) {
  // structuredContent is 2025-06-18; an older client gets the run's facts as text instead.
  if (revision.structured) return result;
  auto structured = result.find("structuredContent");
  if (structured == result.end()) return result;
  if (structured->is_object() && structured->contains("facts"))
    result["content"].push_back(
        {{"type", "text"}, {"text", "facts: " + dump_json((*structured)["facts"])}});
  result.erase("structuredContent");
  return result;
}

void McpFrontend::send_progress(Clock::time_point now) {
  if (!running_ || !running_->progress_token || running_->cancelled ||
      now < running_->next_progress)
    return;
  ToolCall& call = *running_;
  double elapsed = std::round(std::chrono::duration<double>(now - call.started).count() * 10) / 10;
  if (elapsed <= call.last_progress) elapsed = call.last_progress + 0.1;  // must increase
  call.last_progress = elapsed;
  call.next_progress += kProgressEvery;
  if (call.next_progress <= now) call.next_progress = now + kProgressEvery;
  json params = {{"progressToken", *call.progress_token}, {"progress", elapsed}};
  if (call.revision->annotations) params["message"] = progress_text(call, now);
  send(json_rpc_notification("notifications/progress", params));
}

// What a running call has done so far: for progress notifications and a task's status.
std::string McpFrontend::progress_text(const ToolCall& call, Clock::time_point now) const {
  double elapsed = std::chrono::duration<double>(now - call.started).count();
  char text[64];
  std::snprintf(text, sizeof text, "%s running for %.0f s",
                std::string(tool_name(call.tool)).c_str(), elapsed);
  std::string message = text;
  std::string tail = call.record.stream_tail(kProgressTail);
  if (!tail.empty())
    message += "; output so far (last " + std::to_string(kProgressTail) + " bytes):\n" + tail;
  return message;
}

// -- output --------------------------------------------------------------------------------

void McpFrontend::send(const json& message) {
  if (output_broken_) return;
  outbox_ += dump_json(message);  // control characters are escaped: one line per message
  outbox_ += '\n';
  flush_output();
}

void McpFrontend::flush_output() {
  size_t sent = 0;
  while (sent < outbox_.size()) {
    ssize_t n = ::write(out_fd_, outbox_.data() + sent, outbox_.size() - sent);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;  // POLLOUT tells when
    log_line(std::string("mcp: stdout is gone (") + std::strerror(errno) + "): shutting down");
    output_broken_ = true;
    outbox_.clear();
    kernel_.request_shutdown();
    return;
  }
  outbox_.erase(0, sent);
  give_back_room(outbox_);
  if (!running_ && !waiting_.empty() && outbox_.size() <= kMaxUnreadOutput) start_due_ = true;
}

void McpFrontend::stop_if_done() {
  if (!input_open_ && !running_ && waiting_.empty() && outbox_.empty() && !start_due_)
    kernel_.request_shutdown();
}

}  // namespace belljar
