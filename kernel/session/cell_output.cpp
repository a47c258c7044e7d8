// What the worker's output frames mean for the running request (cell_output.hpp). Everything
// read here comes from untrusted code and is checked before it reaches a client.
#include "kernel/session/cell_output.hpp"

#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/output_publisher.hpp"

namespace belljar {

using json = nlohmann::json;

void CellOutput::on_output(WorkerFrame type, const json& frame, CurrentRequest& current) {
  bool executing = current.executing();
  if (!current.running_code() || (type == WorkerFrame::result && !executing))
    return;  // nothing to attribute
  std::optional<json> shown = checks_.display(type, frame, current.budget());
  if (!shown) return;
  Cell& cell = current.cell();
  json& data = (*shown)["data"];
  json& metadata = (*shown)["metadata"];
  if (executing && cell.displays.size() < kDisplaysAudited) {
    json mimes = json::array();
    for (auto& [mime, value] : data.items()) mimes.push_back(mime);
    cell.displays.push_back(mimes);
  }
  if (type == WorkerFrame::result) {
    if (cell.silent) return;
    cell.result_text = json_field(data, "text/plain", cell.result_text);
    client_.publish(
        "execute_result",
        {{"execution_count", cell.execution_count}, {"data", data}, {"metadata", metadata}},
        current.output_parent());
  } else {
    client_.publish(type == WorkerFrame::display ? "display_data" : "update_display_data",
                    std::move(*shown), current.output_parent());
  }
}

void CellOutput::on_clear_output(const json& frame, CurrentRequest& current) {
  if (!current.running_code()) return;
  // A flood of them is output too: charged.
  OutputPublisher(client_, checks_, log_)
      .clear_output(frame, current.budget(), current.output_parent());
}

void CellOutput::on_error(const json& frame, CurrentRequest& current) {
  if (!current.executing()) return;
  Cell& cell = current.cell();
  OutputBudget& budget = current.budget();
  // An error shown and caught (IPython's showtraceback: %run, a display's failing repr) is
  // output only, and the cell goes on; anything but an explicit false ends the cell.
  bool fails_cell = json_field(frame, "fails_cell", true);
  // Once the cap is spent (used up, or something dropped for want of room), a further error
  // is not published (the reply still carries the last one); the first error that fails the
  // cell is always shown, cut to what the budget allows. Each error's kept name and message are
  // charged (charge_error), so a flood of small errors spends the cap like any output.
  bool spent = budget.exhausted() || budget.dropped() > 0;
  bool publish_it = fails_cell ? !cell.error || !spent : !spent;
  json error = create_error_content("", "", json::array());
  for (const char* key : {"ename", "evalue", "traceback"})
    if (auto it = frame.find(key); it != frame.end()) error[key] = *it;
  redactor_.redact_json(error);
  error = charge_error(std::move(error), budget);
  std::string ename = error["ename"], evalue = error["evalue"];
  json traceback = std::move(error["traceback"]);
  if (!fails_cell) {
    if (!cell.silent && publish_it)
      client_.publish("error", create_error_content(ename, evalue, traceback),
                      current.output_parent());
    return;
  }
  limits_.name_limit_in_error(cell, ename, evalue, traceback);
  cell.error = create_error_content(ename, evalue, traceback);
  if (!cell.silent && publish_it) client_.publish("error", *cell.error, current.output_parent());
}

void CellOutput::on_input_request(const json& frame, CurrentRequest& current) {
  if (!current.executing()) {
    // A comm handler has no prompt to show: refused, so it never waits for an answer.
    if (current.running_code())
      worker_.send({{"type", "input_reply"}, {"error", "input() is only answered in a cell"}});
    return;
  }
  OutputBudget& budget = current.budget();
  json content = {
      {"prompt", charge_text(redactor_.redact(json_field(frame, "prompt", "")), budget)},
      {"password", json_field(frame, "password", false)}};
  if (!current.cell().allow_stdin) {
    worker_.send(
        {{"type", "input_reply"}, {"error", "this frontend does not support input requests"}});
    return;
  }
  // Each request is a message to the client: a loop of them is output like any other.
  if (!budget.take_whole(kInputRequestCost)) {
    worker_.send({{"type", "input_reply"}, {"error", "the cell's output limit was reached"}});
    return;
  }
  prompt_.request_input(current.cell().request, content);
}

void CellOutput::on_audit_request(const json& frame, const CurrentRequest& current) {
  // The learner's own cells, as the supervisor recorded them (the worker can't forge them).
  if (!current.executing()) {
    if (current.running_code()) worker_.send({{"type", "audit_reply"}, {"records", json::array()}});
    return;
  }
  json reply = {{"type", "audit_reply"},
                {"records", records_.recent(json_field<size_t>(frame, "last", 10))}};
  if (audit_.failures() > 0) reply["log_error"] = audit_.failure_text();
  worker_.send(reply);
}

}  // namespace belljar
