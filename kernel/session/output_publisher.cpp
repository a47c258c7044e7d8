#include "kernel/session/output_publisher.hpp"

#include "kernel/output/output_stream.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/replies.hpp"

namespace belljar {

using json = nlohmann::json;

bool OutputPublisher::display(WorkerFrame type, const json& frame, OutputBudget& budget,
                              const WireMessage* parent) {
  std::optional<json> shown = checks_.display(type, frame, budget);
  if (!shown) return false;
  client_.publish(type == WorkerFrame::display ? "display_data" : "update_display_data",
                  std::move(*shown), parent);
  return true;
}

bool OutputPublisher::clear_output(const json& frame, OutputBudget& budget,
                                   const WireMessage* parent) {
  json content = {{"wait", json_field(frame, "wait", false)}};
  if (!budget.take_whole(dump_json(content).size())) return false;
  client_.publish("clear_output", std::move(content), parent);
  return true;
}

// Text a stream frame carries is the worker's like the pipes' text: redacted, charged, cut on a
// character boundary. (The pipes' text may hold a secret back across reads; a frame is whole.)
void OutputPublisher::stream(const json& frame, OutputBudget& budget, const WireMessage* parent) {
  std::string name = json_field(frame, "name", std::string());
  if (name != "stdout" && name != "stderr")
    return log_.log("worker frame dropped", "a stream named neither stdout nor stderr");
  std::string text = checks_.redactor().redact(json_field(frame, "text", std::string()));
  uint64_t room = budget.take(text.size());
  if (room < text.size()) text.resize(utf8_complete_prefix(std::string_view(text).substr(0, room)));
  if (!text.empty()) client_.publish("stream", create_stream(name, text), parent);
}

// Checked, redacted, admitted by the widget models, charged to `budget` (output_checks.hpp).
std::string OutputPublisher::comm(const std::string& type, const json& frame, OutputBudget& budget,
                                  const WireMessage* parent, uint64_t& widget_values_cleaned) {
  auto checked = checks_.comm(type, frame, budget, widget_values_cleaned);
  if (auto* why = std::get_if<std::string>(&checked)) return *why;
  WorkerComm& comm = std::get<WorkerComm>(checked);
  client_.publish_comm(type, std::move(comm.content), std::move(comm.metadata), parent,
                       std::move(comm.buffers));
  return "";
}

}  // namespace belljar
