#include "kernel/session/idle_link.hpp"

#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/replies.hpp"

namespace belljar {

using json = nlohmann::json;

const WireMessage* IdleLink::background_parent() const {
  if (const WireMessage* served = core_.served()) return served;
  return last_cell();
}

void IdleLink::on_idle_frame(WorkerFrame type, const json& frame) {
  std::string_view name = worker_frame_name(type);
  if (!idle_output(type))
    return frame_log_.log("worker frame dropped", std::string(name) + " sent between requests");
  if (!core_.running()) return publish_background(type, frame, background_parent());
  if (type == WorkerFrame::stream)  // only ever sent naming a parent (on_parented_output)
    return frame_log_.log("worker frame dropped", "a stream frame that names no request");
  core_.take_output(type, frame);  // a display, its update or clear, a comm message
}

// A task keeps the cell that made it as its parent, and a thread may name one (the worker's
// output_parents.py): that output is shown under the request it names, if the worker was ever
// given it, on the budget of output between requests, since it is not the running cell's.
void IdleLink::on_parented_output(WorkerFrame type, const json& frame) {
  std::string msg_id = json_field(frame, "parent", std::string());
  std::optional<WireMessage> parent = request_parents_.find(msg_id);
  const WireMessage* running = core_.running();
  if (!parent) {
    // Never given (the worker is at fault) or no longer kept (a task that outlived many cells):
    // shown as output that names nothing is, so none is lost and none lands where it chose.
    frame_log_.log("worker output names no request kept",
                   std::string(worker_frame_name(type)) + ": shown with the last cell");
    if (type != WorkerFrame::stream) return on_idle_frame(type, frame);
    if (running) return publisher_.stream(frame, core_.running_budget(), running);
    return publish_background(type, frame, background_parent());
  }
  if (running && running->id() == msg_id) {
    // It names the request being served (its start raced the write): that request's output.
    if (type != WorkerFrame::stream) return on_idle_frame(type, frame);
    core_.show_pipes();  // the pipes' text for it, read before this frame, comes first
    return publisher_.stream(frame, core_.running_budget(), running);
  }
  publish_background(type, frame, &*parent);
}

void IdleLink::publish_background(WorkerFrame type, const json& frame, const WireMessage* parent) {
  auto now = Clock::now();
  OutputBudget& budget = idle_output_.budget(now, output_limit_);
  if (idle_output_.admit_message(now, output_limit_)) {
    if (type == WorkerFrame::display || type == WorkerFrame::update_display) {
      publisher_.display(type, frame, budget, parent);
    } else if (type == WorkerFrame::clear_output) {
      publisher_.clear_output(frame, budget, parent);
    } else if (type == WorkerFrame::stream) {
      publisher_.stream(frame, budget, parent);
    } else {
      uint64_t cleaned = 0;
      std::string name(worker_frame_name(type));
      if (std::string why = publisher_.comm(name, frame, budget, parent, cleaned); !why.empty()) {
        frame_log_.log("worker comm message dropped", why + " (between requests)");
        idle_output_.withhold(why);
      }
      if (cleaned > 0)
        idle_output_.withhold(
            "a widget value's active content (markup, TeX or CSS that acts; "
            "--active-output " +
            std::string(active_output_name(checks_.mode())) + ")");
    }
  }
  tell_withheld();
}

void IdleLink::handed(const WireMessage& request, RequestKind kind) {
  // Output between requests goes to the last cell the worker was given, as ipykernel's goes
  // to the last request it handled.
  if (kind == RequestKind::execute) last_cell_.emplace().header = request.header;
  // A task or a thread of this request may name it later, as the parent of its output.
  if (kind == RequestKind::execute || kind == RequestKind::comm) request_parents_.remember(request);
}

// Once a window: the text read before it is shown first, so the notice follows what got through.
void IdleLink::tell_withheld() {
  std::optional<std::string> notice = idle_output_.take_notice();
  if (!notice) return;
  core_.show_pipes();
  client_.publish("stream", create_stream("stderr", "\n" + *notice + "\n"), background_parent());
}

}  // namespace belljar
