// The debugger link: debug_link.hpp (its rules), docs/design/debugger.md §3.
#include "kernel/session/debug_link.hpp"

#include <cstdio>

#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/protocol/signer.hpp"
#include "kernel/session/frame_reader.hpp"
#include "kernel/session/request_kind.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

using json = nlohmann::json;

void DebugLink::new_worker() {
  decoder_ = WorkerFrameDecoder();
  outbox_.clear();
  worker_debugger_ = false;  // until this worker's hello says otherwise
}

void DebugLink::attach(int debug_fd) {
  fd_ = debug_fd;
  open_ = true;
}

void DebugLink::worker_gone() {
  fd_ = -1;
  open_ = false;
}

void DebugLink::close() {
  open_ = false;
  outbox_.clear();
}

void DebugLink::serve(const WireMessage& message) {
  if (!ready_ && start_error_.empty()) {
    // Answered once the worker says hello (or can't be started), in the order they came.
    if (held_.size() < DebugRequests::kMaxPending) {
      held_.push_back(message);
      return;
    }
  }
  if (requests_.pending() > 0) {
    // One at a time, as ipykernel serves control: each request's busy, reply and idle before
    // the next one's busy (clients pair them up). The worker answers in order anyway.
    if (queued_.size() < DebugRequests::kMaxPending) {
      queued_.push_back(message);
      return;
    }
  }
  client_.status("busy", &message);
  WireMessage parent;
  parent.header = message.header;
  last_request_ = std::move(parent);
  const json& content = message.content;
  if (auto problem = debug_request_problem(content))
    return answer(message, debug_refusal(content, *problem));
  if (std::string why = unavailable(); !why.empty())
    return answer(message, debug_refusal(content, why));
  if (requests_.full())
    return answer(message, debug_refusal(content, "too many debug requests waiting"));
  if (auto code = code_in_debug_request(content)) {
    std::string refusal;
    if (!audit_code(message, *code, refusal))
      return answer(message, debug_refusal(content, refusal));
  }
  uint64_t id = requests_.add(message, Clock::now());
  if (!outbox_.queue({{"type", kDebugRequestFrame}, {"id", id}, {"content", content}})) {
    // The request is answered with the others when the worker's exit is handled.
    return worker_.fault("it left " + format_size(outbox_.size()) + " of debug requests unread");
  }
  flush();
}

std::string DebugLink::unavailable() const {
  if (!ready_)
    return "debugging is not available: " +
           (start_error_.empty() ? std::string("the session is starting") : start_error_);
  if (!worker_debugger_) return "debugging is not available: the sandbox's Python has no debugpy";
  if (!open_ || fd_ < 0) return "debugging is not available: the debugger's channel closed";
  return "";
}

void DebugLink::answer(const WireMessage& request, json content) {
  client_.reply(Channel::control, request, "debug_reply", std::move(content));
  client_.status("idle", &request);
  if (requests_.pending() == 0 && !queued_.empty()) {
    WireMessage next = std::move(queued_.front());
    queued_.pop_front();
    serve(next);  // at most kMaxPending deep: each is queued once
  }
}

bool DebugLink::audit_code(const WireMessage& request, const std::string& code,
                           std::string& refusal) {
  // A debug request that runs code is code run in the session: recorded as a cell is, so the
  // debugger is no way around the audit log.
  if (policy_.required && audit_.failures() > 0) {
    refusal = audit_.failure_text() +
              "; --audit-required refuses debug requests that run code until it is fixed";
    return false;
  }
  json record = {{"client_session", request.header.value("session", "")},
                 {"msg_id", request.id()},
                 {"command", json_field(request.content, "command", "")},
                 {"code_sha256", sha256_hex(code)},
                 {"code_bytes", code.size()}};
  if (auto count = core_.execution_count()) record["execution_count"] = *count;
  if (policy_.code) record["code"] = checks_.redactor().redact(code);
  if (!audit_.record("debug_code", std::move(record)) && policy_.required) {
    refusal = audit_.failure_text() +
              "; --audit-required refuses debug requests that run code until it is fixed";
    return false;
  }
  return true;
}

void DebugLink::flush() {
  if (fd_ >= 0 && open_) outbox_.flush(fd_);
}

void DebugLink::read() {
  if (fd_ < 0 || !open_) return;
  // fd 4's frames to handle_frame, the pipes' text before each, as fd 3's.
  class Sink final : public FrameSink {
   public:
    explicit Sink(DebugLink& link) : link_(link) {}
    bool worker_present() const override { return link_.fd_ >= 0; }
    void read_output_before(const json& frame) override { link_.core_.read_output_before(frame); }
    void handle(const json& frame) override { link_.handle_frame(frame); }
    void fault(const std::string& why) override { link_.worker_.fault(why); }

   private:
    DebugLink& link_;
  } sink(*this);
  if (!read_frames(fd_, decoder_, open_, sink)) {
    // A worker may close its debug channel (it has no debugger): not a fault, only no more
    // debugging in this session. A worker that is ending closes it too, and its exit answers
    // what is pending ("the session restarted"): the others wait a moment for that.
    open_ = false;
    outbox_.clear();
    eof_at_ = Clock::now() + kEofGrace;
  }
}

void DebugLink::handle_frame(const json& frame) {
  const std::string& name = frame["type"].get_ref<const std::string&>();  // checked by next()
  std::optional<WorkerFrame> type = worker_frame(name);
  if (!type || !debug_channel_frame(*type))
    return log_.log("debug frame dropped", "a " + name.substr(0, 64) + " frame on fd 4");
  if (!worker_debugger_)
    return log_.log("debug frame dropped", "the worker said it has no debugger");
  switch (*type) {
    case WorkerFrame::debug_reply:
      return on_reply(frame);
    case WorkerFrame::debug_event:
      return on_event(frame);
    case WorkerFrame::debug_state: {
      auto paused = frame.find("paused");
      if (paused == frame.end() || !paused->is_boolean())
        return log_.log("debug frame dropped", "a debug_state without a boolean paused");
      requests_.set_paused(paused->get<bool>());
      return core_.note_pause(requests_.paused(), Clock::now());
    }
    default:
      return;  // fd 3's frames: dropped above
  }
}

void DebugLink::on_reply(const json& frame) {
  auto id = frame.find("id");
  std::optional<DebugRequests::Pending> pending;
  if (id != frame.end() && id->is_number_unsigned()) pending = requests_.take(*id);
  if (!pending)
    return log_.log("debug frame dropped", "a debug_reply for an id that is not pending");
  auto sent = frame.find("content");
  json content = requests_.check_reply(*pending, sent != frame.end() ? *sent : json());
  bool rich = pending->command == "richInspectVariables" && content.value("success", false);
  size_t bytes = dump_json(content).size();
  std::optional<json> shown = checked_content(std::move(content), rich);
  if (!shown)
    shown = debug_refusal(
        pending->request.content,
        "[belljar] debug reply of " + std::to_string(bytes) + " bytes is over --output-limit");
  requests_.note_answer(*pending, *shown);
  answer(pending->request, std::move(*shown));
}

void DebugLink::on_event(const json& frame) {
  auto content = frame.find("content");
  // Read with find and json_field only: the frame is the worker's, and a const operator[] on a
  // missing key is undefined (the fuzzer found an event without its name).
  std::string event = content != frame.end() && content->is_object()
                          ? json_field(*content, "event", std::string())
                          : std::string();
  if (event.empty() || json_field(*content, "type", "") != "event")
    return log_.log("debug frame dropped", "a debug_event that is no DAP event");
  if (!requests_.admit_event(event, Clock::now()))
    return log_.log(
        "debug event dropped",
        requests_.started()
            ? "past " + std::to_string(DebugRequests::kEventsPerWindow) + " events a minute"
            : "no debug session is started");
  bool essential = essential_debug_event(event);
  size_t bytes = 0;
  std::optional<json> shown;
  if (!essential || (bytes = dump_json(*content).size()) <= kEssentialEventBytes)
    shown = checked_content(*content, false);
  if (shown)
    return client_.publish("debug_event", std::move(*shown),
                           last_request_ ? &*last_request_ : nullptr);
  if (!essential) return log_.log("debug event dropped", "past the output limit");
  // The frontend's view of the session would be wrong without it, and relaying it would be an
  // exemption from the budget: the session ends, and the learner is told why.
  stopped_for_budget(event, bytes);
}

void DebugLink::stopped_for_budget(const std::string& event, size_t bytes) {
  requests_.end_session();
  core_.end_pause(Clock::now());
  char why[160];
  if (bytes > kEssentialEventBytes)
    std::snprintf(why, sizeof why, "larger than the %zu KiB an event may be",
                  kEssentialEventBytes >> 10);
  else
    std::snprintf(why, sizeof why, "past the output limit of %s (--output-limit)",
                  format_size(core_.output_budget().limit()).c_str());
  std::string text = "\n[belljar] the debug session was ended: the debugger's " +
                     event.substr(0, 32) + " event (" + format_size(bytes) + ") is " + why +
                     "; start the debugger again to go on\n";
  audit_.record("debug_session_ended", {{"event", event.substr(0, 32)}, {"bytes", bytes}});
  const WireMessage* parent = core_.output_parent();
  if (!parent) parent = last_request_ ? &*last_request_ : core_.background_parent();
  client_.publish("stream", create_stream("stderr", text), parent);
  // The frontend's debugger still believes in the session (it may show a thread stopped): DAP's
  // own word for a session that is over, from the supervisor, of a fixed shape.
  client_.publish(
      "debug_event",
      {{"seq", 0}, {"type", "event"}, {"event", "terminated"}, {"body", json::object()}}, parent);
}

std::optional<json> DebugLink::checked_content(json content, bool rich_bundle) {
  // The same redaction output gets: a variable's value is the session's data.
  checks_.redactor().redact_json(content);
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
  if (!core_.output_budget().take_whole(bytes)) return std::nullopt;
  return content;
}

void DebugLink::check_deadlines(Clock::time_point now) {
  if (eof_at_ && now >= *eof_at_) {
    eof_at_.reset();
    end_session("the kernel's debugger closed its channel");
  }
  auto due = requests_.next_deadline();
  if (!due || now < *due) return;
  for (auto& expired : requests_.take_expired(now))
    answer(expired.request,
           debug_refusal(expired.request.content, "the kernel's debugger did not answer"));
}

std::optional<DebugLink::Clock::time_point> DebugLink::next_deadline() const {
  auto due = requests_.next_deadline();
  if (eof_at_ && (!due || *eof_at_ < *due)) due = eof_at_;
  return due;
}

void DebugLink::end_session(const std::string& why) {
  eof_at_.reset();
  // Those still waiting their turn are served afresh after the pending ones are answered: by
  // the next worker once it says hello, or refused with the reason there is none.
  std::deque<WireMessage> queued = std::exchange(queued_, {});
  for (auto& pending : requests_.take_all())
    answer(pending.request, debug_refusal(pending.request.content, why));
  outbox_.clear();
  decoder_ = WorkerFrameDecoder();
  core_.end_pause(Clock::now());
  for (auto& message : queued) serve(message);
}

}  // namespace belljar
