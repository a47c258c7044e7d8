// The debugger (issue 31, docs/design/debugger.md §3): JupyterLab's debug_request arrives on
// control; the supervisor hands it to the worker's debugger on its debug channel (fd 4, framed
// as fd 3) under an id of its own, and relays what comes back: the debug_reply on control, the
// debug events on IOPub while a debug session is started, the paused state to the cell's limits.
// The worker is the attacker: what it sends is checked, redacted and charged like output, only
// ids the supervisor issued are answered, and nothing here waits on the worker (a request the
// worker never answers is answered at its deadline). Replies and events are charged to the
// output budget with no exemption: an event the frontend's state hangs on (`stopped`, ...) that
// is past the budget, or larger than kEssentialEventBytes, ends the debug session with a notice
// instead of passing.
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/protocol/signer.hpp"
#include "kernel/session/kernel.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

namespace {
// The largest event the frontend's state hangs on that is relayed (JupyterLab's are a few
// hundred bytes): a larger one ends the debug session, as one past the budget does.
constexpr size_t kEssentialEventBytes = 16u << 10;
// After the debug channel's EOF, the worker's exit may follow (it answers with the reason).
constexpr auto kDebugEofGrace = std::chrono::seconds(2);
}  // namespace

void Kernel::serve_debug_request(const WireMessage& message) {
  if (!worker_ready_ && start_error_.empty()) {
    // Answered once the worker says hello (or can't be started), in the order they came.
    if (held_debug_.size() < DebugRequests::kMaxPending) {
      held_debug_.push_back(message);
      return;
    }
  }
  if (debug_requests_.pending() > 0) {
    // One at a time, as ipykernel serves control: each request's busy, reply and idle before
    // the next one's busy (clients pair them up). The worker answers in order anyway.
    if (queued_debug_.size() < DebugRequests::kMaxPending) {
      queued_debug_.push_back(message);
      return;
    }
  }
  client_.status("busy", &message);
  WireMessage parent;
  parent.header = message.header;
  last_debug_request_ = std::move(parent);
  const json& content = message.content;
  if (auto problem = debug_request_problem(content))
    return answer_debug_request(message, debug_refusal(content, *problem));
  if (std::string why = debug_unavailable(); !why.empty())
    return answer_debug_request(message, debug_refusal(content, why));
  if (debug_requests_.full())
    return answer_debug_request(message, debug_refusal(content, "too many debug requests waiting"));
  if (auto code = code_in_debug_request(content)) {
    std::string refusal;
    if (!audit_debug_code(message, *code, refusal))
      return answer_debug_request(message, debug_refusal(content, refusal));
  }
  uint64_t id = debug_requests_.add(message, Clock::now());
  if (!debug_outbox_.queue({{"type", kDebugRequestFrame}, {"id", id}, {"content", content}})) {
    // The request is answered with the others when the worker's exit is handled.
    return fault_worker("it left " + format_size(debug_outbox_.size()) +
                        " of debug requests unread");
  }
  flush_debug_outbox();
}

std::string Kernel::debug_unavailable() const {
  if (!worker_ready_)
    return "debugging is not available: " +
           (start_error_.empty() ? std::string("the session is starting") : start_error_);
  if (!worker_debugger_) return "debugging is not available: the sandbox's Python has no debugpy";
  if (!debug_open_ || !worker_) return "debugging is not available: the debugger's channel closed";
  return "";
}

void Kernel::answer_debug_request(const WireMessage& request, json content) {
  client_.reply(Channel::control, request, "debug_reply", std::move(content));
  client_.status("idle", &request);
  if (debug_requests_.pending() == 0 && !queued_debug_.empty()) {
    WireMessage next = std::move(queued_debug_.front());
    queued_debug_.pop_front();
    serve_debug_request(next);  // at most kMaxPending deep: each is queued once
  }
}

bool Kernel::audit_debug_code(const WireMessage& request, const std::string& code,
                              std::string& refusal) {
  // A debug request that runs code is code run in the session: recorded as a cell is, so the
  // debugger is no way around the audit log.
  if (options_.policy.audit_required && audit_.failures() > 0) {
    refusal = audit_.failure_text() +
              "; --audit-required refuses debug requests that run code until it is fixed";
    return false;
  }
  json record = {{"client_session", request.header.value("session", "")},
                 {"msg_id", request.id()},
                 {"command", json_field(request.content, "command", "")},
                 {"code_sha256", sha256_hex(code)},
                 {"code_bytes", code.size()}};
  if (executing()) record["execution_count"] = cell_->execution_count;
  if (options_.policy.audit_code) record["code"] = redactor_.redact(code);
  if (!audit_.record("debug_code", std::move(record)) && options_.policy.audit_required) {
    refusal = audit_.failure_text() +
              "; --audit-required refuses debug requests that run code until it is fixed";
    return false;
  }
  return true;
}

void Kernel::flush_debug_outbox() {
  if (worker_ && debug_open_) debug_outbox_.flush(worker_->debug_fd());
}

void Kernel::read_debug_frames() {
  if (!worker_ || !debug_open_) return;
  if (!read_socket(worker_->debug_fd(), debug_decoder_, &Kernel::handle_debug_frame, debug_open_)) {
    // A worker may close its debug channel (it has no debugger): not a fault, only no more
    // debugging in this session. A worker that is ending closes it too, and its exit answers
    // what is pending ("the session restarted"): the others wait a moment for that.
    debug_open_ = false;
    debug_outbox_.clear();
    debug_eof_at_ = Clock::now() + kDebugEofGrace;
  }
}

void Kernel::handle_debug_frame(const json& frame) {
  const std::string& name = frame["type"].get_ref<const std::string&>();  // checked by next()
  std::optional<WorkerFrame> type = worker_frame(name);
  if (!type || !debug_channel_frame(*type))
    return frame_log_.log("debug frame dropped", "a " + name.substr(0, 64) + " frame on fd 4");
  if (!worker_debugger_)
    return frame_log_.log("debug frame dropped", "the worker said it has no debugger");
  switch (*type) {
    case WorkerFrame::debug_reply:
      return on_debug_reply(frame);
    case WorkerFrame::debug_event:
      return on_debug_event(frame);
    case WorkerFrame::debug_state: {
      auto paused = frame.find("paused");
      if (paused == frame.end() || !paused->is_boolean())
        return frame_log_.log("debug frame dropped", "a debug_state without a boolean paused");
      debug_requests_.set_paused(paused->get<bool>());
      return limits_.note_pause(cell_ ? &*cell_ : nullptr, worker_ ? &*worker_ : nullptr,
                                debug_requests_.paused(), Clock::now());
    }
    default:
      return;  // fd 3's frames: dropped above
  }
}

void Kernel::on_debug_reply(const json& frame) {
  auto id = frame.find("id");
  std::optional<DebugRequests::Pending> pending;
  if (id != frame.end() && id->is_number_unsigned()) pending = debug_requests_.take(*id);
  if (!pending)
    return frame_log_.log("debug frame dropped", "a debug_reply for an id that is not pending");
  auto sent = frame.find("content");
  json content = debug_requests_.check_reply(*pending, sent != frame.end() ? *sent : json());
  bool rich = pending->command == "richInspectVariables" && content.value("success", false);
  size_t bytes = dump_json(content).size();
  std::optional<json> shown = checked_debug_content(std::move(content), rich);
  if (!shown)
    shown = debug_refusal(
        pending->request.content,
        "[belljar] debug reply of " + std::to_string(bytes) + " bytes is over --output-limit");
  debug_requests_.note_answer(*pending, *shown);
  answer_debug_request(pending->request, std::move(*shown));
}

void Kernel::on_debug_event(const json& frame) {
  auto content = frame.find("content");
  // Read with find and json_field only: the frame is the worker's, and a const operator[] on a
  // missing key is undefined (the fuzzer found an event without its name).
  std::string event = content != frame.end() && content->is_object()
                          ? json_field(*content, "event", std::string())
                          : std::string();
  if (event.empty() || json_field(*content, "type", "") != "event")
    return frame_log_.log("debug frame dropped", "a debug_event that is no DAP event");
  if (!debug_requests_.admit_event(event, Clock::now()))
    return frame_log_.log(
        "debug event dropped",
        debug_requests_.started()
            ? "past " + std::to_string(DebugRequests::kEventsPerWindow) + " events a minute"
            : "no debug session is started");
  bool essential = essential_debug_event(event);
  size_t bytes = 0;
  std::optional<json> shown;
  if (!essential || (bytes = dump_json(*content).size()) <= kEssentialEventBytes)
    shown = checked_debug_content(*content, false);
  if (shown)
    return client_.publish("debug_event", std::move(*shown),
                           last_debug_request_ ? &*last_debug_request_ : nullptr);
  if (!essential) return frame_log_.log("debug event dropped", "past the output limit");
  // The frontend's view of the session would be wrong without it, and relaying it would be an
  // exemption from the budget: the session ends, and the learner is told why.
  debug_stopped_for_budget(event, bytes);
}

void Kernel::debug_stopped_for_budget(const std::string& event, size_t bytes) {
  debug_requests_.end_session();
  if (cell_) cell_->paused.resume(Clock::now());
  char why[160];
  if (bytes > kEssentialEventBytes)
    std::snprintf(why, sizeof why, "larger than the %zu KiB an event may be",
                  kEssentialEventBytes >> 10);
  else
    std::snprintf(why, sizeof why, "past the output limit of %s (--output-limit)",
                  format_size(output_budget().limit()).c_str());
  std::string text = "\n[belljar] the debug session was ended: the debugger's " +
                     event.substr(0, 32) + " event (" + format_size(bytes) + ") is " + why +
                     "; start the debugger again to go on\n";
  audit_.record("debug_session_ended", {{"event", event.substr(0, 32)}, {"bytes", bytes}});
  const WireMessage* parent = output_parent();
  if (!parent) parent = last_debug_request_ ? &*last_debug_request_ : background_parent();
  client_.publish("stream", create_stream("stderr", text), parent);
  // The frontend's debugger still believes in the session (it may show a thread stopped): DAP's
  // own word for a session that is over, from the supervisor, of a fixed shape.
  client_.publish(
      "debug_event",
      {{"seq", 0}, {"type", "event"}, {"event", "terminated"}, {"body", json::object()}}, parent);
}

std::optional<json> Kernel::checked_debug_content(json content, bool rich_bundle) {
  // The same redaction output gets: a variable's value is the session's data.
  redactor_.redact_json(content);
  if (rich_bundle) {
    // JupyterLab renders a rich inspection with rendermime, as a display: the same checks.
    auto body = content.find("body");
    if (body != content.end() && body->is_object() && body->contains("data")) {
      json display = {{"data", (*body)["data"]},
                      {"metadata", body->value("metadata", json::object())}};
      OutputBudget uncharged;  // charged below, with the rest of the reply
      uncharged.reset(UINT64_MAX);
      if (auto shown = checks_.display(WorkerFrame::display, display, uncharged)) {
        (*body)["data"] = std::move((*shown)["data"]);
        (*body)["metadata"] = std::move((*shown)["metadata"]);
      }
    }
  }
  size_t bytes = dump_json(content).size();
  if (!output_budget().take_whole(bytes)) return std::nullopt;
  return content;
}

void Kernel::check_debug_deadlines(Clock::time_point now) {
  if (debug_eof_at_ && now >= *debug_eof_at_) {
    debug_eof_at_.reset();
    end_debug_session("the kernel's debugger closed its channel");
  }
  auto due = debug_requests_.next_deadline();
  if (!due || now < *due) return;
  for (auto& expired : debug_requests_.take_expired(now))
    answer_debug_request(expired.request, debug_refusal(expired.request.content,
                                                        "the kernel's debugger did not answer"));
}

void Kernel::end_debug_session(const std::string& why) {
  debug_eof_at_.reset();
  // Those still waiting their turn are served afresh after the pending ones are answered: by
  // the next worker once it says hello, or refused with the reason there is none.
  std::deque<WireMessage> queued = std::exchange(queued_debug_, {});
  for (auto& pending : debug_requests_.take_all())
    answer_debug_request(pending.request, debug_refusal(pending.request.content, why));
  debug_outbox_.clear();
  debug_decoder_ = WorkerFrameDecoder();
  if (cell_) cell_->paused.resume(Clock::now());
  for (auto& message : queued) serve_debug_request(message);
}

void Kernel::release_held_debug_requests() {
  for (auto& message : std::exchange(held_debug_, {})) submit_control(message);
}

}  // namespace belljar
