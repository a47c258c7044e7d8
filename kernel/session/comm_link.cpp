// Comms (the protocol ipywidgets and other interactive libraries stand on) between the frontend
// and the worker. The supervisor routes and checks; the comms themselves live in the worker.
//
// A frontend's comm_open / comm_msg / comm_close is a shell request like execute, handed to the
// worker in order, with the message's own limits, budget and busy/idle. One that arrives while a
// cell runs in the worker is handed at once instead, ahead of the requests queued behind the
// cell, as ipykernel 7 serves them while a cell awaits (comms_during_cell.hpp): its handler runs
// when the cell's loop turns, its output is parented to it and charged to the cell, it has no
// busy/idle of its own; if the cell ends first, it is served after it as an ordinary comm
// request, ahead of the requests queued behind the cell.
// comm_info_request is answered from the worker's live registry. The worker's comm messages, sent
// while it serves a request, are published on iopub parented to that request. The threat is the
// worker: each of its comm messages is checked (ids, shapes, canonical base64 buffers), redacted,
// charged like any output (to the cell's budget, or to the budget comm handlers share per minute:
// kernel.hpp) and counted, so a flood is refused, logged and told once, never passed on to the
// browser. What the page does with comm traffic (requirejs for modules, innerHTML and MathJax for
// widget text, CSS for layout) falls under --active-output: widget_models.hpp checks each message
// first.
#include "kernel/output/output_stream.hpp"
#include "kernel/protocol/base64.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/session/kernel.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

// The frame for a frontend's comm message, or null when it is not one (no comm_id, a comm_open
// without a target): such a message has nothing to be delivered to.
json Kernel::comm_request_frame(const WireMessage& message, const std::string& id) {
  const json& content = message.content;
  std::string type = message.type();
  if (!content.is_object() || !usable_comm_name(content.value("comm_id", json())) ||
      (type == "comm_open" && !usable_comm_name(content.value("target_name", json()))))
    return nullptr;
  const std::string& comm_id = content["comm_id"].get_ref<const std::string&>();
  if (type == "comm_open")
    checks_.widgets().opened_by_frontend(comm_id, content["target_name"].get<std::string>());
  else if (type == "comm_close")
    checks_.widgets().closed(comm_id);
  json buffers = json::array();
  for (const auto& buffer : message.buffers) buffers.push_back(base64_encode(buffer));
  return {{"type", "comm"},
          {"id", id},
          {"msg_type", type},
          {"content", content},
          {"metadata", message.metadata},
          {"buffers", buffers},
          {"msg_id", message.id()}};
}

// A comm message the worker sent while serving the current request: published, counted.
void Kernel::publish_comm(const std::string& type, const json& frame, const WireMessage* parent) {
  std::string why =
      cell_->comm_published >= kCommMessagesPerRequest
          ? "more than " + std::to_string(kCommMessagesPerRequest) + " in one request"
          : publish_checked_comm(type, frame, budget_, parent, cell_->widget_values_cleaned);
  if (why.empty()) {
    ++cell_->comm_published;
    return;
  }
  if (cell_->comm_dropped++ == 0) cell_->comm_first_drop = why;
  frame_log_.log("worker comm message dropped", why);
}

// Checked, redacted, admitted by the widget models, charged to `budget` (output_checks.hpp).
std::string Kernel::publish_checked_comm(const std::string& type, const json& frame,
                                         OutputBudget& budget, const WireMessage* parent,
                                         uint64_t& widget_values_cleaned) {
  auto checked = checks_.comm(type, frame, budget, widget_values_cleaned);
  if (auto* why = std::get_if<std::string>(&checked)) return *why;
  WorkerComm& comm = std::get<WorkerComm>(checked);
  client_.publish_comm(type, std::move(comm.content), std::move(comm.metadata), parent,
                       std::move(comm.buffers));
  return "";
}

// Only while a cell runs in the worker, and only when no comm message waits in the queue (one
// that came first, while the cell was held for its survey, must not be passed). While the failed
// cell's frontend gathers what it sent (stop_on_error), the cell is over: queued as usual.
bool Kernel::takes_comm_during_cell(const WireMessage& message) const {
  return executing() && cell_->in_worker && worker_ready_ && frames_open_ && !queue_.collecting() &&
         request_kind(message.type()) == RequestKind::comm && !queue_.holds_comm();
}

// One at a time: the next goes once the worker said the one before was handled.
void Kernel::hand_comms_during_cell() {
  while (executing() && comms_during_cell_.ready_to_hand()) {
    const WireMessage& message = comms_during_cell_.next();
    size_t bytes = dump_json(message.content).size() + dump_json(message.metadata).size();
    for (const auto& buffer : message.buffers) bytes += buffer.size() / 3 * 4 + 4;
    if (bytes > CommsDuringCell::kMaxHandedBytes) return comms_during_cell_.hold_rest();
    std::string id = "r" + std::to_string(++requests_started_);
    json frame = comm_request_frame(message, id);
    if (frame.is_null()) {
      request_log_.log("comm message dropped", message.type() + " without a comm_id or target");
      comms_during_cell_.drop_next();
      continue;
    }
    frame["during"] = cell_->id;  // served only inside that cell (worker/PROTOCOL.md)
    comms_during_cell_.hand(std::move(id));
    send_to_worker(frame);
  }
}

// The worker starts the handler of the comm message handed during the cell: what it writes from
// now on until its `done` is that message's output (the pipes' text was read up to this frame
// and shown as the cell's).
void Kernel::on_comm_begin(const json& frame) {
  if (executing() && !json_field(frame, "idle", false) &&
      comms_during_cell_.begin(json_field(frame, "id", "")))
    return;
  frame_log_.log("worker frame dropped",
                 "comm_begin for no comm message handed during a cell, or a second one");
}

// A frame of the handler that runs during the cell: output, parented to its comm message and
// charged to the cell's budget and comm count; `done` ends it and the next may go.
void Kernel::on_comm_during_cell_frame(WorkerFrame type, const json& frame) {
  const WireMessage* parent = comms_during_cell_.running();
  switch (type) {
    case WorkerFrame::display:
    case WorkerFrame::update_display:
      if (std::optional<json> shown = checks_.display(type, frame, budget_))
        client_.publish(type == WorkerFrame::display ? "display_data" : "update_display_data",
                        std::move(*shown), parent);
      return;
    case WorkerFrame::clear_output:
      if (json content = {{"wait", json_field(frame, "wait", false)}};
          budget_.take_whole(dump_json(content).size()))
        client_.publish("clear_output", std::move(content), parent);
      return;
    case WorkerFrame::comm_open:
    case WorkerFrame::comm_msg:
    case WorkerFrame::comm_close:
      return publish_comm(std::string(worker_frame_name(type)), frame, parent);
    case WorkerFrame::done:
      comms_during_cell_.finish(json_field(frame, "id", ""));
      return hand_comms_during_cell();
    default:  // a result, an error, a question or an answer: no handler's to send
      return frame_log_.log(
          "worker frame dropped",
          std::string(worker_frame_name(type)) + " for a comm message handled during a cell");
  }
}

// The cell is over (finish_cell), or the worker went with it: a message whose handler had not
// begun never ran (the worker serves a frame marked `during` only inside that cell, and drops it
// after), so it goes back to the front of the queue with those not handed, in order, ahead of
// the requests queued behind the cell, to be served as ordinary comm requests with ids of their
// own. One whose handler had begun and not ended ran with that cell (a worker that ends a cell
// there is the attacker's): it is not served again.
void Kernel::return_comms_during_cell() {
  std::deque<WireMessage> waiting = comms_during_cell_.take_waiting();
  if (std::optional<CommsDuringCell::Handed> handed = comms_during_cell_.take_handed()) {
    if (!handed->begun)
      waiting.push_front(std::move(handed->request));
    else
      request_log_.log("comm message not served again",
                       "its handler had begun when its cell ended or the worker went");
  }
  queue_.push_shell_first(std::move(waiting));
}

void Kernel::tell_session_lost_by_handler(const std::string& why) {
  session_lost_notice_ =
      "[belljar] a widget's handler (a comm message from the page) ended the "
      "session: " +
      why + "\n";
  client_.publish("stream", create_stream("stderr", "\n" + session_lost_notice_), &cell_->request);
}

// Said on stderr once per cell, or once per comm budget window: the widgets on the page may be
// out of step with the sandbox.
void Kernel::tell_comm_drops() {
  if (!cell_ || (cell_->comm_dropped == 0 && cell_->widget_values_cleaned == 0)) return;
  if (cell_->kind == RequestKind::comm && !comm_window_.tell_drops()) return;
  std::string text;
  if (cell_->comm_dropped > 0)
    text +=
        "\n[belljar] " + std::to_string(cell_->comm_dropped) +
        " comm message(s) from the sandbox were withheld (the first: " + cell_->comm_first_drop +
        "): widgets may be out of step\n";
  if (cell_->widget_values_cleaned > 0)
    text += "\n[belljar] " + std::to_string(cell_->widget_values_cleaned) +
            " widget value(s) held active content (markup, TeX or CSS that acts), removed "
            "(--active-output " +
            active_output_name(options_.policy.active_output) + ")\n";
  client_.publish("stream", create_stream("stderr", text), &cell_->request);
}

void Kernel::finish_comm(const json& done) {
  drain_pipes();  // what the handler wrote is shown before its idle, as a cell's
  learn_uncounted_output(done);
  flush_streams(true);
  tell_comm_drops();
  if (cell_->limit_hit != LimitHit::none)
    client_.publish("stream",
                    create_stream("stderr", "\n[belljar] a comm handler passed the " +
                                                std::string(limit_name(cell_->limit_hit)) +
                                                " limit and was interrupted\n"),
                    &cell_->request);
  comm_window_.handler_finished(budget_);  // what this handler spent is spent for the window
  WireMessage request = std::move(cell_->request);
  cell_.reset();
  if (worker_) limits_.request_finished(worker_->cpu_seconds(), false);
  client_.status("idle", &request);
  dispatch_next();
}

// comm_info_reply: what the worker says is open, each entry checked, within the cap; unless
// --active-output allow, only comms the page was told of, by the target it was told.
json Kernel::comm_info_content(const json& frame) {
  json content = create_comm_info_reply();
  if (options_.policy.active_output == ActiveOutput::allow)
    content["comms"] = checked_comm_list(frame);
  else
    content["comms"] = checked_comm_list(
        frame, [this](const std::string& id) { return checks_.widgets().target_of(id); });
  return content;
}

}  // namespace belljar
