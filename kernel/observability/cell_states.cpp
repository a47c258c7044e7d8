#include "kernel/observability/cell_states.hpp"

namespace belljar {

std::string_view limit_name(LimitHit limit) {
  switch (limit) {
    case LimitHit::none:
      return "";
    case LimitHit::timeout:
      return "timeout";
    case LimitHit::cpu:
      return "cpu";
    case LimitHit::memory:
      return "memory";
    case LimitHit::workspace:
      return "workspace";
  }
  return "";
}

std::string_view status_name(CellStatus status) {
  switch (status) {
    case CellStatus::ok:
      return "ok";
    case CellStatus::error:
      return "error";
    case CellStatus::interrupted:
      return "interrupted";
    case CellStatus::timeout:
      return "timeout";
    case CellStatus::memory:
      return "memory";
    case CellStatus::workspace_quota:
      return "workspace_quota";
    case CellStatus::crashed:
      return "crashed";
  }
  return "error";
}

CellStatus status_for(LimitHit limit, bool failed, bool user_interrupted) {
  switch (limit) {
    case LimitHit::timeout:
    case LimitHit::cpu:
      return CellStatus::timeout;
    case LimitHit::memory:
      return CellStatus::memory;
    case LimitHit::workspace:
      return CellStatus::workspace_quota;
    case LimitHit::none:
      break;
  }
  if (!failed) return CellStatus::ok;
  return user_interrupted ? CellStatus::interrupted : CellStatus::error;
}

}  // namespace belljar
