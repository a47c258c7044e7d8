#pragma once
// What a finished cell leaves behind: its execute_reply (the user_expressions and payloads the
// worker sent, checked, redacted and charged like output; the facts in metadata.belljar), the
// audit log's `cell` record and the metrics, the history, and the records %audit shows. The
// worker is the attacker here too: what it sent for the reply passes the same checks as output,
// and %audit shows what the supervisor recorded, never what the worker says.
// Doors: the policy, the audit log, the metrics, the diagnostics log, the redactor, the client
// (the notice of output dropped past the limit); the cell and what the core measured of it,
// given per call.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kernel/observability/audit_log.hpp"
#include "kernel/observability/diagnostics.hpp"
#include "kernel/observability/metrics.hpp"
#include "kernel/output/output_stream.hpp"
#include "kernel/output/redactor.hpp"
#include "kernel/session/cell.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/history.hpp"
#include "kernel/session/newest_entries.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

class CellRecords {
 public:
  using Clock = std::chrono::steady_clock;

  CellRecords(const Policy& policy, const std::string& session_id, AuditRecords& audit,
              Metrics& metrics, RateLimitedLog& log, const Redactor& redactor, ClientDoor& client)
      : policy_(policy),
        session_id_(session_id),
        audit_(audit),
        metrics_(metrics),
        log_(log),
        redactor_(redactor),
        client_(client),
        history_(policy.history_size) {}

  // What the core measured of the cell, from the sandbox and the pipes.
  struct Measured {
    double cpu_seconds = 0;  // the session's CPU since the cell started, background excluded
    uint64_t peak_memory_bytes = 0;
    uint64_t stdout_bytes = 0, stderr_bytes = 0;
    uint64_t comms_handled = 0;  // comm messages whose handlers ran while the cell awaited
  };
  struct Reply {
    nlohmann::json content, metadata;
  };
  // The finished cell's reply, from its `done` frame; its record written, counted and kept.
  // `budget` is the cell's: user_expressions and payloads are charged to it.
  Reply finish(Cell& cell, const nlohmann::json& done, const Measured& measured,
               OutputBudget& budget);

  // %audit: the last `last` cells' records, oldest first, as the supervisor recorded them.
  nlohmann::json recent(size_t last) const;
  // history_request's answer.
  nlohmann::json history(const nlohmann::json& request) const { return history_.query(request); }

 private:
  nlohmann::json reply_content(const Cell& cell, const nlohmann::json& done,
                               OutputBudget& budget) const;
  nlohmann::json facts(const Cell& cell, const Measured& measured,
                       const OutputBudget& budget) const;
  nlohmann::json record(Cell& cell, const nlohmann::json& facts, const Measured& measured,
                        const OutputBudget& budget, CellStatus status) const;

  const Policy& policy_;
  const std::string& session_id_;
  AuditRecords& audit_;
  Metrics& metrics_;
  RateLimitedLog& log_;
  const Redactor& redactor_;
  ClientDoor& client_;
  History history_;
  // The `cell` audit records %audit may show, newest last: kept as text (about 500 bytes a
  // cell, where parsed records took 1.8 KiB), the last 100 and within 256 KiB, since with
  // --audit-code or many displays one record can be large. %audit shows 10 by default; the
  // audit log has every record, and each kernel of a host's hundreds holds these.
  NewestEntries<std::string> recent_{100, 256u << 10};
};

}  // namespace belljar
