#pragma once
// The states a cell ends in, as values: which limit stopped it and the status it is recorded
// with. Each has one function that spells it; the execute_reply's metadata (belljar.limit_hit),
// the audit log's `cell` records and the metrics all use it, so the wire and the log can't
// drift apart and no code decides anything by comparing text.
#include <array>
#include <cstdint>
#include <string_view>

namespace belljar {

// The limit that stopped a cell, if any.
enum class LimitHit : uint8_t { none, timeout, cpu, memory, workspace };
inline constexpr std::array kLimitsHit = {LimitHit::timeout, LimitHit::cpu, LimitHit::memory,
                                          LimitHit::workspace};
// "timeout", "cpu", "memory", "workspace"; "" for none (null on the wire).
std::string_view limit_name(LimitHit limit);

// How a cell ended, for the audit log and the metrics (the reply's own status is ok/error).
enum class CellStatus : uint8_t {
  ok,
  error,
  interrupted,      // the user's interrupt ended it
  timeout,          // --timeout or --cpu (or %%limits)
  memory,           // the memory limit
  workspace_quota,  // --workspace-quota
  crashed,          // the worker died or the session was reset under it
};
inline constexpr std::array kCellStatuses = {
    CellStatus::ok,     CellStatus::error,           CellStatus::interrupted, CellStatus::timeout,
    CellStatus::memory, CellStatus::workspace_quota, CellStatus::crashed};
std::string_view status_name(CellStatus status);

// The status a stopped cell is recorded with: a limit names it, else the reply's status.
CellStatus status_for(LimitHit limit, bool failed, bool user_interrupted);

}  // namespace belljar
