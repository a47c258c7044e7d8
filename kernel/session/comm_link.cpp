// Comms (the protocol ipywidgets and other interactive libraries stand on) between the frontend
// and the worker. The supervisor routes and checks; the comms themselves live in the worker.
//
// A frontend's comm_open / comm_msg / comm_close is a shell request like execute, handed to the
// worker in order (a message that arrives while a cell runs waits for it, as in ipykernel), with
// the message's own limits, budget and busy/idle; comm_info_request is answered from the
// worker's live registry. The worker's comm messages, sent while it serves a request, are
// published on iopub parented to that request. The threat is the worker: each of its comm
// messages is checked (ids, shapes, canonical base64 buffers), redacted, charged like any output
// (to the cell's budget, or to the budget comm handlers share per minute: kernel.hpp) and
// counted, so a flood is refused, logged and told once, never passed on to the browser. What the
// page does with comm traffic (requirejs for modules, innerHTML and MathJax for widget text, CSS
// for layout) falls under --active-output: widget_models.hpp checks each message first.
#include "kernel/protocol/base64.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/session/kernel.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

// The frame for a frontend's comm message, or null when it is not one (no comm_id, a comm_open
// without a target): such a message has nothing to be delivered to.
json Kernel::comm_request_frame(const Cell& cell) {
  const WireMessage& message = cell.request;
  const json& content = message.content;
  std::string type = message.type();
  if (!content.is_object() || !usable_comm_name(content.value("comm_id", json())) ||
      (type == "comm_open" && !usable_comm_name(content.value("target_name", json()))))
    return nullptr;
  const std::string& comm_id = content["comm_id"].get_ref<const std::string&>();
  if (type == "comm_open")
    widget_models_.opened_by_frontend(comm_id, content["target_name"].get<std::string>());
  else if (type == "comm_close")
    widget_models_.closed(comm_id);
  json buffers = json::array();
  for (const auto& buffer : message.buffers) buffers.push_back(base64_encode(buffer));
  return {{"type", "comm"},
          {"id", cell.id},
          {"msg_type", type},
          {"content", content},
          {"metadata", message.metadata},
          {"buffers", buffers},
          {"msg_id", message.id()}};
}

// A comm message the worker sent while serving the current request: published, counted.
void Kernel::publish_comm(const std::string& type, const json& frame) {
  std::string why = cell_->comm_published >= kCommMessagesPerRequest
                        ? "more than " + std::to_string(kCommMessagesPerRequest) + " in one request"
                        : publish_checked_comm(type, frame, budget_, &cell_->request,
                                               cell_->widget_values_cleaned);
  if (why.empty()) {
    ++cell_->comm_published;
    return;
  }
  if (cell_->comm_dropped++ == 0) cell_->comm_first_drop = why;
  frame_log_.log("worker comm message dropped", why);
}

// Checked (worker_comms.hpp), redacted, admitted by the widget models, charged to `budget`.
std::string Kernel::publish_checked_comm(const std::string& type, const json& frame,
                                         OutputBudget& budget, const WireMessage* parent,
                                         uint64_t& widget_values_cleaned) {
  auto checked = check_worker_comm(type, frame);
  if (auto* why = std::get_if<std::string>(&checked)) return *why;
  WorkerComm& comm = std::get<WorkerComm>(checked);
  redactor_.redact_json(comm.content);  // a widget's value is output too
  if (std::string why = widget_models_.admit(type, comm.content); !why.empty()) return why;
  widget_values_cleaned += widget_models_.take_cleaned();
  redactor_.redact_json(comm.content);  // decoded character references could spell a secret
  if (!budget.take_whole(comm.size)) return type + " past the output limit";
  frontend_->publish_comm(type, std::move(comm.content), std::move(comm.metadata), parent,
                          std::move(comm.buffers));
  return "";
}

void Kernel::tell_session_lost_by_handler(const std::string& why) {
  session_lost_notice_ =
      "[belljar] a widget's handler (a comm message from the page) ended the "
      "session: " +
      why + "\n";
  publish("stream", create_stream("stderr", "\n" + session_lost_notice_), &cell_->request);
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
  publish("stream", create_stream("stderr", text), &cell_->request);
}

void Kernel::finish_comm(const json& done) {
  drain_pipes();  // what the handler wrote is shown before its idle, as a cell's
  learn_uncounted_output(done);
  flush_streams(true);
  tell_comm_drops();
  if (cell_->limit_hit != LimitHit::none)
    publish("stream",
            create_stream("stderr", "\n[belljar] a comm handler passed the " +
                                        std::string(limit_name(cell_->limit_hit)) +
                                        " limit and was interrupted\n"),
            &cell_->request);
  comm_window_.handler_finished(budget_);  // what this handler spent is spent for the window
  WireMessage request = std::move(cell_->request);
  cell_.reset();
  if (worker_) background_.request_finished(worker_->cpu_seconds(), false);
  publish_status("idle", &request);
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
        frame, [this](const std::string& id) { return widget_models_.target_of(id); });
  return content;
}

}  // namespace belljar
