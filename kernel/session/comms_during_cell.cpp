#include "kernel/session/comms_during_cell.hpp"

#include <utility>

namespace belljar {

void CommsDuringCell::hand(std::string id) {
  handed_ = Handed{std::move(waiting_.front()), std::move(id), false};
  waiting_.pop_front();
}

bool CommsDuringCell::begin(std::string_view id) {
  if (!handed_ || handed_->begun || handed_->id != id) return false;
  handed_->begun = true;
  return true;
}

std::optional<WireMessage> CommsDuringCell::finish(std::string_view id) {
  if (!runs(id)) return std::nullopt;
  WireMessage request = std::move(handed_->request);
  handed_.reset();
  ++handled_;
  return request;
}

std::optional<CommsDuringCell::Handed> CommsDuringCell::take_handed() {
  return std::exchange(handed_, std::nullopt);
}

std::deque<WireMessage> CommsDuringCell::take_waiting() {
  held_ = false;
  return std::exchange(waiting_, {});
}

}  // namespace belljar
