#pragma once
// The workspace link: the workspace guard's reports (sandbox/jail/workspace_watch.hpp, as
// SurveyReport: sandbox/jail_protocol/jail_reports.hpp) and the broker's refusals, read on the
// reactor and acted on. When to survey and what a survey means are WorkspaceSurveys'
// (workspace_surveys.hpp); here each new guard and each refusal is audited and told to the
// learner, a cell waits for a survey made after it came and fails closed when the workspace
// could not be checked, and past --workspace-quota the running cell is stopped like any limit:
// KeyboardInterrupt inside, named for what it was, the sandbox gone 2 s later if ignored.
// Doors: the audit log, the client (notices to the running cell), the warden's channel (given
// per call: the running worker's, or none); of the cell, the one given to the call.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kernel/observability/audit_log.hpp"
#include "kernel/session/cell.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/workspace_surveys.hpp"
#include "sandbox/jail_client/worker_process.hpp"

namespace belljar {

class WorkspaceLink {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kGuardsAudited = 50;  // per survey; the rest are counted

  WorkspaceLink(AuditRecords& audit, ClientDoor& client, uint64_t quota_bytes)
      : audit_(audit), client_(client), quota_bytes_(quota_bytes) {}

  // A new warden answers none of the old one's surveys.
  void new_warden() { surveys_.new_warden(); }
  // A cell's frame, held until a survey asked now is in (files that appeared since the last
  // cell are guarded first), moved from `frame`. False when this sandbox guards no workspace:
  // `frame` is left as it was, to be handed at once.
  bool hold(WorkspaceGuardChannel& guard, nlohmann::json& frame);
  // The timer's survey, when one is due.
  void schedule(WorkspaceGuardChannel& guard, Clock::time_point now);
  std::optional<Clock::time_point> next_due(const WorkspaceGuardChannel& guard) const;

  // The broker's refusals: each audited and told, to `executing` (the running cell, or null)
  // now unless a cell is held for its survey, else at the next chance.
  void take_refusals(WorkspaceGuardChannel& guard, const Cell* executing);
  // What a survey asks of the core: the held cell's frame to hand to the worker, or the held
  // cell to fail (why: the workspace could not be checked).
  struct Step {
    std::optional<nlohmann::json> release;
    std::optional<std::string> fail_held;
  };
  // One survey's report taken and acted on (audit, quota, notices); nullopt when none waits.
  // `executing`: the running cell, stopped here if the quota was passed during it.
  std::optional<Step> take_survey(WorkspaceGuardChannel& guard, Cell* executing);

 private:
  void request_survey(WorkspaceGuardChannel& guard, bool measure);
  void tell_notices(const Cell* executing);

  AuditRecords& audit_;
  ClientDoor& client_;
  uint64_t quota_bytes_;
  // When to survey, the cell held for its survey, the quota, what to tell the learner at the
  // next chance.
  WorkspaceSurveys surveys_;
};

}  // namespace belljar
