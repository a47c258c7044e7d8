#pragma once
// The checks every piece of the worker's output passes before a client sees it, in one part:
// a display's bundle (bundle_check), the redaction of bound and environment secrets (from all
// of a message the client gets: data, metadata, transient, a comm's content and buffers), active
// output (kernel/output/active_output.hpp: --active-output), a comm message's shape
// (worker_comms.hpp) and what the page's widget models admit (kernel/output/widget_models.hpp),
// and the charge to the output budget it is given. The links (the worker's frames, output
// between requests, comm handlers during a cell, the debugger's rich inspections) all call these,
// so no path from the worker to the page skips one. It owns the Redactor (the secrets output
// masks, fixed at start; the parts that redact elsewhere, the records and the prompts, are lent
// it) and the widget models: the comms the page knows, which a frontend's comm_open and a new
// worker change.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "kernel/output/redactor.hpp"
#include "kernel/output/widget_models.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/worker_comms.hpp"
#include "kernel/session/worker_frames.hpp"

namespace belljar {

class OutputChecks {
 public:
  OutputChecks(Redactor redactor, ActiveOutput mode)
      : redactor_(std::move(redactor)), mode_(mode), widgets_(mode) {}

  // A display's content (data, metadata, transient) as a client may get it, charged whole to
  // `budget`; an invalid bundle is replaced by a plain explanation, an invalid update dropped.
  // nullopt when nothing is shown (past the budget, an invalid update).
  std::optional<nlohmann::json> display(WorkerFrame type, const nlohmann::json& frame,
                                        OutputBudget& budget);
  // A comm message of the worker's (comm_open, comm_msg, comm_close): checked, redacted, admitted
  // by the widget models, charged to `budget`; or why it is withheld, bounded for a notice.
  // Widget values whose active content was removed are added to `widget_values_cleaned`.
  std::variant<WorkerComm, std::string> comm(const std::string& type, const nlohmann::json& frame,
                                             OutputBudget& budget, uint64_t& widget_values_cleaned);

  const Redactor& redactor() const { return redactor_; }
  ActiveOutput mode() const { return mode_; }
  WidgetModels& widgets() { return widgets_; }

 private:
  const Redactor redactor_;
  ActiveOutput mode_;
  WidgetModels widgets_;  // the comms the page knows; what of a widget's state it gets
};

}  // namespace belljar
