#include "kernel/protocol/replay_guard.hpp"

namespace belljar {

bool ReplayGuard::admit(const std::string& signature) {
  if (!seen_.insert(signature).second) return false;
  order_.push_back(signature);
  if (order_.size() > capacity_) {
    seen_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

}  // namespace belljar
