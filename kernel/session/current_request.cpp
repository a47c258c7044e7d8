// The request being served now (current_request.hpp): its beginning, its end, and whether a
// frame of the worker's answers it.
#include "kernel/session/current_request.hpp"

#include <stdexcept>

#include "kernel/protocol/json_field.hpp"

namespace belljar {

bool CurrentRequest::answers(const nlohmann::json& frame) const {
  return cell_ && !cell_->id.empty() && json_field(frame, "id", "") == cell_->id;
}

Cell& CurrentRequest::begin(Cell cell) {
  if (cell_) throw std::logic_error("a request began while another ran");
  return cell_.emplace(std::move(cell));
}

nlohmann::json CurrentRequest::settle_checkpoint(bool ok) {
  Checkpoints::Settled settled = checkpoints_.settle(ok);
  if (settled.execution_count) execution_count_ = *settled.execution_count;
  return std::move(settled.facts);
}

Cell CurrentRequest::end() {
  if (!cell_) throw std::logic_error("no request is running");
  Cell ended = std::move(*cell_);
  cell_.reset();
  return ended;
}

}  // namespace belljar
