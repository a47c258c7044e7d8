#include "kernel/session/request_parents.hpp"

namespace belljar {

void RequestParents::remember(const WireMessage& request) {
  if (request.id().empty()) return;  // nothing the worker could name it by
  WireMessage kept;
  kept.header = request.header;
  requests_.push_back(std::move(kept));
  if (requests_.size() > kMaxRequests) requests_.pop_front();
}

const WireMessage* RequestParents::find(std::string_view msg_id) const {
  if (msg_id.empty()) return nullptr;
  for (auto it = requests_.rbegin(); it != requests_.rend(); ++it)
    if (it->id() == msg_id) return &*it;
  return nullptr;
}

}  // namespace belljar
