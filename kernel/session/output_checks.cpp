#include "kernel/session/output_checks.hpp"

#include "kernel/output/active_output.hpp"
#include "kernel/output/bundle_check.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/buffer_room.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {

json object_or_empty(const json& frame, const char* key) {
  auto it = frame.find(key);
  return it != frame.end() && it->is_object() ? *it : json::object();
}

// A refusal's reason may quote what the worker sent (a module name, a method): it goes into a
// notice on the client's stderr and the log, charged to no budget, so it is bounded here.
constexpr size_t kMaxReason = 240;
std::string bounded_reason(const std::string& why) {
  if (why.size() <= kMaxReason) return why;
  return why.substr(0, utf8_complete_prefix(std::string_view(why).substr(0, kMaxReason))) + "… (" +
         std::to_string(why.size()) + " bytes)";
}

}  // namespace

std::optional<json> OutputChecks::display(WorkerFrame type, const json& frame,
                                          OutputBudget& budget) {
  auto data_it = frame.find("data");
  json data = data_it != frame.end() ? *data_it : json();
  json metadata = object_or_empty(frame, "metadata");
  json transient = object_or_empty(frame, "transient");
  std::optional<std::string> problem = bundle_problem(data);
  if (!problem && type == WorkerFrame::update_display && !transient.contains("display_id"))
    problem = "an update without a display_id";
  if (problem) {
    // Never forwarded: the client gets a plain explanation in its place.
    data = {{"text/plain", "[belljar] an invalid display was dropped: " + *problem}};
    metadata = json::object();
    if (type == WorkerFrame::update_display) return std::nullopt;
  }
  redactor_.redact_json(data);  // before: the frame's srcdoc holds it escaped
  data = apply_active_output(data, mode_, &widgets_);
  redactor_.redact_json(data);  // after: decoded references could spell a secret
  // The metadata and the transient part reach the client too (a display_id is any string the
  // cell chose): redacted like the bundle (the outside attack on issue 40's redesign).
  redactor_.redact_json(metadata);
  redactor_.redact_json(transient);
  // The whole message counts: metadata and transient are the worker's bytes too.
  if (!budget.take_whole(dump_json(data).size() + dump_json(metadata).size() +
                         dump_json(transient).size()))
    return std::nullopt;  // over the output cap
  return json{{"data", std::move(data)},
              {"metadata", std::move(metadata)},
              {"transient", std::move(transient)}};
}

std::variant<WorkerComm, std::string> OutputChecks::comm(const std::string& type, const json& frame,
                                                         OutputBudget& budget,
                                                         uint64_t& widget_values_cleaned) {
  auto checked = check_worker_comm(type, frame);
  if (auto* why = std::get_if<std::string>(&checked)) return bounded_reason(*why);
  WorkerComm& comm = std::get<WorkerComm>(checked);
  redactor_.redact_json(comm.content);  // a widget's value is output too
  if (std::string why = widgets_.admit(type, comm.content, comm.buffers); !why.empty())
    return bounded_reason(why);
  widget_values_cleaned += widgets_.take_cleaned();
  redactor_.redact_json(comm.content);  // decoded character references could spell a secret
  // The binary buffers are the worker's bytes as well: a value in them is replaced as in text.
  for (auto& buffer : comm.buffers) buffer = redactor_.redact(std::move(buffer));
  if (!budget.take_whole(comm.size)) return type + " past the output limit";
  return std::move(comm);
}

}  // namespace belljar
