#include "kernel/session/request_parents.hpp"

#include "kernel/protocol/bounded_json.hpp"

namespace belljar {

void RequestParents::remember(const WireMessage& request) {
  std::string msg_id = request.id();
  if (msg_id.empty()) return;  // nothing the worker could name it by
  std::string header = dump_json(request.header);
  size_t bytes = msg_id.size() + header.size();
  requests_.push({std::move(msg_id), std::move(header)}, bytes);
}

std::optional<WireMessage> RequestParents::find(std::string_view msg_id) const {
  if (msg_id.empty()) return std::nullopt;
  for (size_t i = requests_.size(); i-- > 0;) {
    if (requests_[i].msg_id != msg_id) continue;
    WireMessage parent;
    parent.header = nlohmann::json::parse(requests_[i].header);  // text this class wrote
    return parent;
  }
  return std::nullopt;
}

}  // namespace belljar
