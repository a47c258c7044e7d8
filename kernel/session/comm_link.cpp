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
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/session/kernel.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

namespace {

constexpr size_t kMaxCommId = 256;    // ids are uuids; names are short
constexpr size_t kMaxBuffers = 1024;  // per message
constexpr size_t kMaxCommInfoEntries = 10'000;

bool short_text(const json& value, size_t max) {
  return value.is_string() && !value.get_ref<const std::string&>().empty() &&
         value.get_ref<const std::string&>().size() <= max;
}

json object_at(const json& holder, const char* key) {
  auto it = holder.find(key);
  return it != holder.end() && it->is_object() ? *it : json::object();
}

}  // namespace

// The frame for a frontend's comm message, or null when it is not one (no comm_id, a comm_open
// without a target): such a message has nothing to be delivered to.
json Kernel::comm_request_frame(const Cell& cell) {
  const WireMessage& message = cell.request;
  const json& content = message.content;
  std::string type = message.type();
  if (!content.is_object() || !short_text(content.value("comm_id", json()), kMaxCommId) ||
      (type == "comm_open" && !short_text(content.value("target_name", json()), kMaxCommId)))
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

// A comm message the worker sent while serving the current request.
void Kernel::publish_comm(const std::string& type, const json& frame) {
  auto refuse = [&](const std::string& why) {
    if (cell_->comm_dropped++ == 0) cell_->comm_first_drop = why;
    frame_log_.log("worker comm message dropped", why);
  };
  if (cell_->comm_published >= kCommMessagesPerRequest)
    return refuse("more than " + std::to_string(kCommMessagesPerRequest) + " in one request");
  json comm_id = frame.value("comm_id", json());
  if (!short_text(comm_id, kMaxCommId)) return refuse(type + " without a usable comm_id");
  json content = {{"comm_id", comm_id}, {"data", object_at(frame, "data")}};
  if (type == "comm_open") {
    json target = frame.value("target_name", json());
    if (!short_text(target, kMaxCommId)) return refuse("comm_open without a usable target_name");
    content["target_name"] = target;
    json module = frame.value("target_module", json());
    content["target_module"] = short_text(module, kMaxCommId) ? module : json(nullptr);
  }
  json metadata = object_at(frame, "metadata");
  std::vector<std::string> buffers;
  size_t size = dump_json(content).size() + dump_json(metadata).size();
  if (auto list = frame.find("buffers"); list != frame.end() && !list->is_null()) {
    if (!list->is_array() || list->size() > kMaxBuffers)
      return refuse(type + " with buffers that are not a list of at most " +
                    std::to_string(kMaxBuffers));
    for (const auto& item : *list) {
      auto bytes =
          item.is_string() ? base64_decode(item.get_ref<const std::string&>()) : std::nullopt;
      if (!bytes) return refuse(type + " with a buffer that is not base64");
      size += bytes->size();
      buffers.push_back(std::move(*bytes));
    }
  }
  redactor_.redact_json(content);  // a widget's value is output too
  if (std::string why = widget_models_.admit(type, content); !why.empty()) return refuse(why);
  cell_->widget_values_cleaned += widget_models_.take_cleaned();
  redactor_.redact_json(content);  // decoded character references could spell a secret
  if (!budget_.take_whole(size)) return refuse(type + " past the output limit");
  ++cell_->comm_published;
  frontend_->publish_with_buffers(type, std::move(content), &cell_->request, std::move(buffers));
}

// Said on stderr once per cell, or once per comm budget window: the widgets on the page may be
// out of step with the sandbox.
void Kernel::tell_comm_drops() {
  if (!cell_ || (cell_->comm_dropped == 0 && cell_->widget_values_cleaned == 0)) return;
  if (cell_->kind == RequestKind::comm && std::exchange(comm_drops_told_, true)) return;
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
  comm_budget_ = budget_;  // what this handler spent is spent for the window
  WireMessage request = std::move(cell_->request);
  cell_.reset();
  if (worker_) background_.request_finished(worker_->cpu_seconds(), false);
  publish_status("idle", &request);
  dispatch_next();
}

// comm_info_reply: what the worker says is open, each entry checked, within the cap.
json Kernel::comm_info_content(const json& frame) {
  json comms = json::object();
  auto listed = frame.find("comms");
  if (listed != frame.end() && listed->is_object())
    for (const auto& [id, entry] : listed->items()) {
      if (comms.size() >= kMaxCommInfoEntries) break;
      if (id.empty() || id.size() > kMaxCommId || !entry.is_object()) continue;
      json target = entry.value("target_name", json());
      if (!short_text(target, kMaxCommId)) continue;
      // A reloaded page rebuilds its widgets from this list: only comms it was told of, by the
      // target it was told (allow: as the worker says).
      if (options_.policy.active_output != ActiveOutput::allow) {
        std::string known = widget_models_.target_of(id);
        if (known.empty()) continue;
        target = known;
      }
      comms[id] = {{"target_name", target}};
    }
  json content = create_comm_info_reply();
  content["comms"] = std::move(comms);
  return content;
}

}  // namespace belljar
