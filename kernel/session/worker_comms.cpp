#include "kernel/session/worker_comms.hpp"

#include "kernel/protocol/base64.hpp"
#include "kernel/protocol/bounded_json.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {

// A field by reference (null when missing): buffers and lists are read in place, not copied.
const json& field(const json& holder, const char* key) {
  static const json kMissing;
  auto it = holder.find(key);
  return it != holder.end() ? *it : kMissing;
}

json object_at(const json& holder, const char* key) {
  const json& value = field(holder, key);
  return value.is_object() ? value : json::object();
}

}  // namespace

json comm_metadata(const json& metadata) {
  if (!metadata.is_object()) return json::object();
  const json& version = field(metadata, "version");
  if (!version.is_string()) return json::object();
  const std::string& text = version.get_ref<const std::string&>();
  // Up to four numbers of up to six digits, dot-separated: "2", "2.1.0".
  size_t numbers = 0, digits = 0;
  for (char c : text) {
    if (c >= '0' && c <= '9' && digits < 6) {
      ++digits;
    } else if (c == '.' && digits > 0 && numbers < 3) {
      ++numbers;
      digits = 0;
    } else {
      return json::object();
    }
  }
  if (digits == 0) return json::object();
  return {{"version", text}};
}

bool usable_comm_name(const json& value) {
  return value.is_string() && !value.get_ref<const std::string&>().empty() &&
         value.get_ref<const std::string&>().size() <= kMaxCommId;
}

std::variant<WorkerComm, std::string> check_worker_comm(std::string_view type, const json& frame) {
  const std::string name(type);
  const json& comm_id = field(frame, "comm_id");
  if (!usable_comm_name(comm_id)) return name + " without a usable comm_id";
  WorkerComm comm;
  comm.content = {{"comm_id", comm_id}, {"data", object_at(frame, "data")}};
  if (type == "comm_open") {
    const json& target = field(frame, "target_name");
    if (!usable_comm_name(target)) return std::string("comm_open without a usable target_name");
    comm.content["target_name"] = target;
    const json& module = field(frame, "target_module");
    comm.content["target_module"] = usable_comm_name(module) ? module : json(nullptr);
  }
  comm.metadata = comm_metadata(field(frame, "metadata"));
  comm.size = dump_json(comm.content).size() + dump_json(comm.metadata).size();
  const json& list = field(frame, "buffers");
  if (!list.is_null()) {
    if (!list.is_array() || list.size() > kMaxCommBuffers)
      return name + " with buffers that are not a list of at most " +
             std::to_string(kMaxCommBuffers);
    for (const auto& item : list) {
      auto bytes =
          item.is_string() ? base64_decode(item.get_ref<const std::string&>()) : std::nullopt;
      if (!bytes) return name + " with a buffer that is not base64";
      comm.size += bytes->size();
      comm.buffers.push_back(std::move(*bytes));
    }
  }
  return comm;
}

json checked_comm_list(const json& frame,
                       const std::function<std::string(const std::string&)>& known_target) {
  json comms = json::object();
  const json& listed = field(frame, "comms");
  if (!listed.is_object()) return comms;
  for (const auto& [id, entry] : listed.items()) {
    if (comms.size() >= kMaxCommInfoEntries) break;
    if (id.empty() || id.size() > kMaxCommId || !entry.is_object()) continue;
    const json& target = field(entry, "target_name");
    if (!usable_comm_name(target)) continue;
    if (!known_target) {
      comms[id] = {{"target_name", target}};
      continue;
    }
    // A reloaded page rebuilds its widgets from this list: only comms it was told of, by the
    // target it was told.
    std::string known = known_target(id);
    if (!known.empty()) comms[id] = {{"target_name", known}};
  }
  return comms;
}

OutputBudget CommBudgetWindow::start_handler(Clock::time_point now, uint64_t limit) {
  if (!filled_ || now - *filled_ >= kWindow) {
    budget_.reset(limit);
    filled_ = now;
    told_ = false;
  }
  return budget_;
}

}  // namespace belljar
