#pragma once
// The last step of the worker's output on every path that is not a request's own result: a
// display, a clear_output, a stream frame or a comm message, put through the output checks
// (output_checks.hpp), charged to the budget it is given and published under the parent it is
// given. The worker link (a request's clear_output), the comm link (a handler's output during a
// cell) and the idle link (output between requests, or naming an earlier request) each call
// these, so the step is written once and no path skips a check or the charge.
// Threat: the worker. It chooses neither the budget nor the parent (the caller does); a stream
// frame names stdout or stderr or is dropped, its text is redacted and cut on a character
// boundary to what the budget allows; a clear_output is output too (a flood of them is charged).
// Doors: the client, the output checks, the diagnostics log. It holds no state of its own.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/output_checks.hpp"
#include "kernel/session/worker_frames.hpp"

namespace belljar {

class OutputPublisher {
 public:
  OutputPublisher(ClientDoor& client, OutputChecks& checks, RateLimitedLog& log)
      : client_(client), checks_(checks), log_(log) {}

  // display or update_display: checked as a bundle, charged whole; false when nothing was shown.
  bool display(WorkerFrame type, const nlohmann::json& frame, OutputBudget& budget,
               const WireMessage* parent);
  bool clear_output(const nlohmann::json& frame, OutputBudget& budget, const WireMessage* parent);
  // A stream frame's text: redacted, charged, cut on a character boundary.
  void stream(const nlohmann::json& frame, OutputBudget& budget, const WireMessage* parent);
  // comm_open, comm_msg or comm_close: "" once published, else why it was withheld. Widget values
  // whose active content was removed are added to `widget_values_cleaned`.
  std::string comm(const std::string& type, const nlohmann::json& frame, OutputBudget& budget,
                   const WireMessage* parent, uint64_t& widget_values_cleaned);

 private:
  ClientDoor& client_;
  OutputChecks& checks_;
  RateLimitedLog& log_;
};

}  // namespace belljar
