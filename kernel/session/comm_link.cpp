#include "kernel/session/comm_link.hpp"

#include "kernel/output/output_stream.hpp"
#include "kernel/protocol/base64.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/replies.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

using json = nlohmann::json;

// Null for a message that has nothing to be delivered to.
json CommLink::request_frame(const WireMessage& message, const std::string& id) {
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

void CommLink::publish(const std::string& type, const json& frame, const WireMessage* parent,
                       Cell& cell, OutputBudget& budget) {
  std::string why = cell.comm_published >= kMessagesPerRequest
                        ? "more than " + std::to_string(kMessagesPerRequest) + " in one request"
                        : publisher_.comm(type, frame, budget, parent, cell.widget_values_cleaned);
  if (why.empty()) {
    ++cell.comm_published;
    return;
  }
  if (cell.comm_dropped++ == 0) cell.comm_first_drop = why;
  frame_log_.log("worker comm message dropped", why);
}

// Only while a cell runs in the worker, and only when no comm message waits in the queue (one
// that came first, while the cell was held for its survey, must not be passed). While the failed
// cell's frontend gathers what it sent (stop_on_error), the cell is over: queued as usual.
bool CommLink::takes_during_cell(const WireMessage& message, bool cell_listens,
                                 bool queue_holds_comm) {
  return cell_listens && request_kind(message.type()) == RequestKind::comm && !queue_holds_comm;
}

void CommLink::arrive(WireMessage message, const Cell& cell, uint64_t& frame_ids) {
  during_cell_.arrive(std::move(message));
  hand_during_cell(cell, frame_ids);
}

// One at a time: the next goes once the worker said the one before was handled.
void CommLink::hand_during_cell(const Cell& cell, uint64_t& frame_ids) {
  while (during_cell_.ready_to_hand()) {
    const WireMessage& message = during_cell_.next();
    size_t bytes = dump_json(message.content).size() + dump_json(message.metadata).size();
    for (const auto& buffer : message.buffers) bytes += buffer.size() / 3 * 4 + 4;
    if (bytes > CommsDuringCell::kMaxHandedBytes) return during_cell_.hold_rest();
    std::string id = "r" + std::to_string(++frame_ids);
    json frame = request_frame(message, id);
    if (frame.is_null()) {
      request_log_.log("comm message dropped", message.type() + " without a comm_id or target");
      during_cell_.drop_next();
      continue;
    }
    frame["during"] = cell.id;  // served only inside that cell (worker/PROTOCOL.md)
    during_cell_.hand(std::move(id));
    worker_.send(frame);
  }
}

// The worker starts the handler of the comm message handed during the cell: what it writes from
// now on until its `done` is that message's output (the pipes' text was read up to this frame
// and shown as the cell's).
void CommLink::on_begin(const json& frame, bool executing) {
  if (executing && !json_field(frame, "idle", false) &&
      during_cell_.begin(json_field(frame, "id", "")))
    return;
  frame_log_.log("worker frame dropped",
                 "comm_begin for no comm message handed during a cell, or a second one");
}

void CommLink::on_handler_frame(WorkerFrame type, const json& frame, Cell& cell,
                                OutputBudget& budget, uint64_t& frame_ids) {
  const WireMessage* parent = during_cell_.running();
  switch (type) {
    case WorkerFrame::display:
    case WorkerFrame::update_display:
      publisher_.display(type, frame, budget, parent);
      return;
    case WorkerFrame::clear_output:
      publisher_.clear_output(frame, budget, parent);
      return;
    case WorkerFrame::comm_open:
    case WorkerFrame::comm_msg:
    case WorkerFrame::comm_close:
      return publish(std::string(worker_frame_name(type)), frame, parent, cell, budget);
    case WorkerFrame::done:
      during_cell_.finish(json_field(frame, "id", ""));
      return hand_during_cell(cell, frame_ids);
    default:  // a result, an error, a question or an answer: no handler's to send
      return frame_log_.log(
          "worker frame dropped",
          std::string(worker_frame_name(type)) + " for a comm message handled during a cell");
  }
}

// A message whose handler had not begun never ran (the worker serves a frame marked `during` only
// inside that cell, and drops it after), so it goes back with those not handed, in order, to be
// served with an id of its own. One whose handler had begun and not ended ran with that cell (a
// worker that ends a cell there is the attacker's): it is not served again.
std::deque<WireMessage> CommLink::take_back() {
  std::deque<WireMessage> waiting = during_cell_.take_waiting();
  if (std::optional<CommsDuringCell::Handed> handed = during_cell_.take_handed()) {
    if (!handed->begun)
      waiting.push_front(std::move(handed->request));
    else
      request_log_.log("comm message not served again",
                       "its handler had begun when its cell ended or the worker went");
  }
  return waiting;
}

void CommLink::handler_finished(const Cell& handler, const OutputBudget& budget) {
  tell_drops(handler);
  if (handler.limit_hit != LimitHit::none)
    client_.publish("stream",
                    create_stream("stderr", "\n[belljar] a comm handler passed the " +
                                                std::string(limit_name(handler.limit_hit)) +
                                                " limit and was interrupted\n"),
                    &handler.request);
  window_.handler_finished(budget);  // what this handler spent is spent for the window
}

// The widgets on the page may be out of step with the sandbox.
void CommLink::tell_drops(const Cell& cell) {
  if (cell.comm_dropped == 0 && cell.widget_values_cleaned == 0) return;
  if (cell.kind == RequestKind::comm && !window_.tell_drops()) return;
  std::string text;
  if (cell.comm_dropped > 0)
    text += "\n[belljar] " + std::to_string(cell.comm_dropped) +
            " comm message(s) from the sandbox were withheld (the first: " + cell.comm_first_drop +
            "): widgets may be out of step\n";
  if (cell.widget_values_cleaned > 0)
    text += "\n[belljar] " + std::to_string(cell.widget_values_cleaned) +
            " widget value(s) held active content (markup, TeX or CSS that acts), removed "
            "(--active-output " +
            active_output_name(checks_.mode()) + ")\n";
  client_.publish("stream", create_stream("stderr", text), &cell.request);
}

void CommLink::tell_session_lost_by_handler(const std::string& why, const WireMessage& handler) {
  session_lost_notice_ =
      "[belljar] a widget's handler (a comm message from the page) ended the "
      "session: " +
      why + "\n";
  client_.publish("stream", create_stream("stderr", "\n" + session_lost_notice_), &handler);
}

// The session this cell runs in is not the one the learner last saw: said first.
void CommLink::tell_session_lost(const WireMessage& cell_request) {
  if (session_lost_notice_.empty()) return;
  client_.publish("stream", create_stream("stderr", std::exchange(session_lost_notice_, {})),
                  &cell_request);
}

json CommLink::info(const json& frame) {
  json content = create_comm_info_reply();
  if (checks_.mode() == ActiveOutput::allow)
    content["comms"] = checked_comm_list(frame);
  else
    content["comms"] = checked_comm_list(
        frame, [this](const std::string& id) { return checks_.widgets().target_of(id); });
  return content;
}

}  // namespace belljar
