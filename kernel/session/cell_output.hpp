#pragma once
// What the worker's output frames mean for the running request (a cell, or a comm message's
// handler): displays, their updates and the result, clear_output, errors, input() prompts and
// %audit's question. Handed each frame that names the running request (Kernel::handle_frame),
// and an `idle` display or clear_output while a request's code runs (idle_link.hpp, through
// KernelCore::take_output), with the request itself (current_request.hpp) as an argument. It
// holds no state: the core makes one for each frame (KernelCore::cell_output).
// Threat: the worker. Its output reaches the client only through the output checks
// (output_checks.hpp: bundles, redaction, active output) and charged to the running request's
// budget; a request with no output of its own (a lookup) shows none of it, a comm handler no
// result, no error and no prompt. A silent cell's result and errors are not published. Past the
// budget an error is not published (the reply still carries it), but a cell's first error always
// is, cut to what the budget allows. input() is refused to the worker (answered with an error, so
// it never waits) for a comm handler, a cell whose client said allow_stdin false, or past the
// budget (kInputRequestCost each, prompt aside); %audit's records are the supervisor's own (the
// worker can't forge them), and outside a cell an empty list.
// Doors: the client, the worker (its answers), the output checks, the diagnostics log, the
// redactor; read only: the finished cells' records (%audit), the audit log's failures, the
// limits' naming of a limit's interrupt; the frontend's prompt (Prompt, the core's).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "kernel/observability/audit_log.hpp"
#include "kernel/observability/diagnostics.hpp"
#include "kernel/output/redactor.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "kernel/session/cell_limits.hpp"
#include "kernel/session/cell_records.hpp"
#include "kernel/session/current_request.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/output_checks.hpp"
#include "kernel/session/request_kind.hpp"

namespace belljar {

class CellOutput {
 public:
  static constexpr size_t kDisplaysAudited = 1000;   // mime lists kept per cell for the audit
  static constexpr uint64_t kInputRequestCost = 64;  // what one input_request is charged

  // The frontend's input prompt (Frontend::request_input), which the client door does not carry.
  class Prompt {
   public:
    virtual ~Prompt() = default;
    virtual void request_input(const WireMessage& request, nlohmann::json content) = 0;
  };

  CellOutput(ClientDoor& client, WorkerDoor& worker, OutputChecks& checks, RateLimitedLog& log,
             const Redactor& redactor, const CellRecords& records, const AuditRecords& audit,
             const CellLimits& limits, Prompt& prompt)
      : client_(client),
        worker_(worker),
        checks_(checks),
        log_(log),
        redactor_(redactor),
        records_(records),
        audit_(audit),
        limits_(limits),
        prompt_(prompt) {}

  // display, update_display or result: checked, charged whole, published under the request.
  void on_output(WorkerFrame type, const nlohmann::json& frame, CurrentRequest& current);
  void on_clear_output(const nlohmann::json& frame, CurrentRequest& current);
  // An error shown (fails_cell false) or the cell's own, which its reply carries.
  void on_error(const nlohmann::json& frame, CurrentRequest& current);
  void on_input_request(const nlohmann::json& frame, CurrentRequest& current);
  void on_audit_request(const nlohmann::json& frame, const CurrentRequest& current);

 private:
  ClientDoor& client_;
  WorkerDoor& worker_;
  OutputChecks& checks_;
  RateLimitedLog& log_;
  const Redactor& redactor_;
  const CellRecords& records_;
  const AuditRecords& audit_;
  const CellLimits& limits_;
  Prompt& prompt_;
};

}  // namespace belljar
