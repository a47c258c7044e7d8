// Output of code running between requests: the session's asyncio loop runs while the worker
// waits for the next request (worker/belljar_worker/event_loop.py), and a thread a cell started
// runs on after it. What they print reaches the pipes like any text; what they display or send
// to a widget comes as frames marked `idle` in place of a request's id (worker/PROTOCOL.md).
//
// As the pipes' text: while a cell or a comm handler runs, such a frame is that request's output
// (its budget, its parent); otherwise it is shown between cells, parented to the last cell as
// ipykernel parents it to its last request, and charged to the budget of output between requests
// (idle_output.hpp), told once a window when it withheld anything. The frame passes the same
// checks as a request's: bundles, redaction, active output, the widget models. Only output may
// come so (request_kind.hpp's idle_output): a result, an error, a done or a question sent between
// requests is dropped, so such a frame can never end or steer a request.
//
// Output may also name the request it belongs to (`parent`): a task keeps the cell that made it,
// a thread may name one (worker/belljar_worker/output_parents.py). It goes to that request if
// the worker was given it (request_parents.hpp), whenever it comes: the same checks, and the
// budget of output between requests unless it is the running request's own.
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

const WireMessage* Kernel::background_parent() const {
  if (cell_ && cell_->in_worker) {
    // The text of a comm handler running during the cell is its message's, as ipykernel's is.
    if (const WireMessage* handler = comms_during_cell_.running(); handler && executing())
      return handler;
    return &cell_->request;
  }
  return last_parent_ ? &*last_parent_ : nullptr;
}

void Kernel::on_idle_frame(WorkerFrame type, const json& frame) {
  std::string_view name = worker_frame_name(type);
  if (!idle_output(type))
    return frame_log_.log("worker frame dropped", std::string(name) + " sent between requests");
  if (!worker_runs_code()) return show_between_requests(type, frame);
  switch (type) {
    case WorkerFrame::display:
    case WorkerFrame::update_display:
      return on_output(type, frame);
    case WorkerFrame::clear_output:
      return on_clear_output(frame);
    case WorkerFrame::stream:  // only ever sent naming a parent (on_parented_output)
      return frame_log_.log("worker frame dropped", "a stream frame that names no request");
    default:  // the comm messages (idle_output)
      return publish_comm(std::string(name), frame, &cell_->request);
  }
}

void Kernel::show_between_requests(WorkerFrame type, const json& frame) {
  publish_background(type, frame, background_parent());
}

// A task keeps the cell that made it as its parent, and a thread may name one (the worker's
// output_parents.py): that output is shown under the request it names, if the worker was ever
// given it, on the budget of output between requests, since it is not the running cell's.
void Kernel::on_parented_output(WorkerFrame type, const json& frame) {
  std::string msg_id = json_field(frame, "parent", std::string());
  std::optional<WireMessage> parent = request_parents_.find(msg_id);
  if (!parent) {
    // Never given (the worker is at fault) or no longer kept (a task that outlived many cells):
    // shown as output that names nothing is, so none is lost and none lands where it chose.
    frame_log_.log("worker output names no request kept",
                   std::string(worker_frame_name(type)) + ": shown with the last cell");
    if (type != WorkerFrame::stream) return on_idle_frame(type, frame);
    if (worker_runs_code()) return publish_stream_frame(frame, budget_, output_parent());
    return publish_background(type, frame, background_parent());
  }
  if (worker_runs_code() && cell_->request.id() == msg_id) {
    // It names the request being served (its start raced the write): that request's output.
    if (type != WorkerFrame::stream) return on_idle_frame(type, frame);
    flush_streams(true);  // the pipes' text for it, read before this frame, comes first
    return publish_stream_frame(frame, budget_, output_parent());
  }
  publish_background(type, frame, &*parent);
}

void Kernel::publish_background(WorkerFrame type, const json& frame, const WireMessage* parent) {
  auto now = Clock::now();
  uint64_t limit = options_.policy.output_limit_bytes;
  OutputBudget& budget = idle_output_.budget(now, limit);
  if (idle_output_.admit_message(now, limit)) {
    if (type == WorkerFrame::display || type == WorkerFrame::update_display) {
      if (std::optional<json> shown = checks_.display(type, frame, budget))
        client_.publish(type == WorkerFrame::display ? "display_data" : "update_display_data",
                        std::move(*shown), parent);
    } else if (type == WorkerFrame::clear_output) {
      json content = {{"wait", json_field(frame, "wait", false)}};
      if (budget.take_whole(dump_json(content).size()))
        client_.publish("clear_output", std::move(content), parent);
    } else if (type == WorkerFrame::stream) {
      publish_stream_frame(frame, budget, parent);
    } else {
      uint64_t cleaned = 0;
      std::string name(worker_frame_name(type));
      if (std::string why = publish_checked_comm(name, frame, budget, parent, cleaned);
          !why.empty()) {
        frame_log_.log("worker comm message dropped", why + " (between requests)");
        idle_output_.withhold(why);
      }
      if (cleaned > 0)
        idle_output_.withhold(
            "a widget value's active content (markup, TeX or CSS that acts; "
            "--active-output " +
            std::string(active_output_name(options_.policy.active_output)) + ")");
    }
  }
  tell_idle_withheld();
}

// Text a stream frame carries is the worker's like the pipes' text: redacted, charged, cut on a
// character boundary. (The pipes' text may hold a secret back across reads; a frame is whole.)
void Kernel::publish_stream_frame(const json& frame, OutputBudget& budget,
                                  const WireMessage* parent) {
  std::string name = json_field(frame, "name", std::string());
  if (name != "stdout" && name != "stderr")
    return frame_log_.log("worker frame dropped", "a stream named neither stdout nor stderr");
  std::string text = redactor_.redact(json_field(frame, "text", std::string()));
  uint64_t room = budget.take(text.size());
  if (room < text.size()) text.resize(utf8_complete_prefix(std::string_view(text).substr(0, room)));
  if (!text.empty()) client_.publish("stream", create_stream(name, text), parent);
}

// What the worker sent and wrote before a request was sent to it came between requests: shown as
// such, never as the request's own output, so a task's flood does not eat a cell's budget. (What
// it writes after, until it reads the request, is the request's, as a thread's text is.) Frames
// are read only while no request runs: none of them can then end one.
void Kernel::take_output_between_requests() {
  if (!worker_ || cell_) return;
  read_frames();
  drain_pipes();
  flush_streams(true);
}

void Kernel::hand_to_worker(const json& frame) {
  if (cell_ && !cell_->in_worker) {
    drain_pipes();  // written while the cell was held for its survey: still between requests
    flush_streams(true);
    cell_->in_worker = true;
    // Output between requests goes to the last cell the worker was given, as ipykernel's goes
    // to the last request it handled.
    if (executing()) last_parent_.emplace().header = cell_->request.header;
    // A task or a thread of this request may name it later, as the parent of its output.
    if (executing() || cell_->kind == RequestKind::comm) request_parents_.remember(cell_->request);
  }
  send_to_worker(frame);
}

// Once a window: the text read before it is shown first, so the notice follows what got through.
void Kernel::tell_idle_withheld() {
  std::optional<std::string> notice = idle_output_.take_notice();
  if (!notice) return;
  flush_streams(true);
  client_.publish("stream", create_stream("stderr", "\n" + *notice + "\n"), background_parent());
}

}  // namespace belljar
