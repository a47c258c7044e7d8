#pragma once
// The request being served now, owned in one place: the running Cell (a cell, a comm message's
// handler, a lookup), the session's execution count and the checkpoints a rollback returns it
// to (checkpoints.hpp), the source of the frame ids requests are sent to the worker under, and
// the running request's output budget. The core begins and ends a
// request here (requests.cpp); the parts are asked its facts as arguments of their calls.
// Threat: the worker. Every frame it sends names the request it answers by the supervisor's own
// id ("r<n>", never reused, whatever msg_id a client chose): only a frame naming the running
// request is taken as its own (answers), so a stale or forged one never lands in a later request.
// What its code outputs is the running request's only once the worker has it (worker_runs_code);
// before, it came between requests. Only a cell or a comm handler has output of its own
// (output_parent); a lookup has none.
// Doors: none; it holds state and answers questions.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kernel/output/output_stream.hpp"
#include "kernel/session/cell.hpp"
#include "kernel/session/checkpoints.hpp"

namespace belljar {

class CurrentRequest {
 public:
  // `checkpoints`: how many the session keeps (--checkpoints).
  explicit CurrentRequest(size_t checkpoints = 0) : checkpoints_(checkpoints) {}

  // Questions
  bool active() const { return cell_.has_value(); }
  // The running request; only while active (else std::bad_optional_access).
  Cell& cell() { return cell_.value(); }
  const Cell& cell() const { return cell_.value(); }
  // The running request, or null.
  Cell* get() { return cell_ ? &*cell_ : nullptr; }
  // The running request when it is a cell (execute), or null.
  Cell* executing_cell() { return executing() ? &*cell_ : nullptr; }
  bool executing() const { return cell_ && cell_->kind == RequestKind::execute; }
  // A request whose code may produce output: a cell, or a comm message's handler.
  bool running_code() const {
    return cell_ && (cell_->kind == RequestKind::execute || cell_->kind == RequestKind::comm);
  }
  // Such a request, once the worker has it: output that says nothing of its request (the
  // pipes' text, `idle` frames) is then its own, else output between requests.
  bool worker_runs_code() const { return running_code() && cell_->in_worker; }
  // The frame names the running request by its id.
  bool answers(const nlohmann::json& frame) const;
  // Where the running request's output goes: a comm handler's displays are its request's output,
  // as a cell's are (ipywidgets' Output and interact route them by that parent); null for none.
  const WireMessage* output_parent() const { return running_code() ? &cell_->request : nullptr; }
  // The running request's output budget (its output is charged here, not its lookups' replies).
  OutputBudget& budget() { return budget_; }
  // The session's execution count: the last non-silent cell's (0 before any).
  int execution_count() const { return execution_count_; }
  // The count the ids come from, for the comm link's handlers handed during a cell
  // (comm_link.hpp): they take theirs from the same count, so no id is given twice.
  uint64_t& frame_ids() { return requests_started_; }

  // Steps, as a request begins: a fresh id (given even if the request then does not start);
  // for a cell, its execution count (the next one unless silent) and its budget.
  std::string fresh_id() { return "r" + std::to_string(++requests_started_); }
  int count_execution(bool silent) { return silent ? execution_count_ : ++execution_count_; }
  // The session's checkpoints: a checkpoint cell asks them (Checkpoints::ask).
  Checkpoints& checkpoints() { return checkpoints_; }
  // The running cell ended (ok: without an error): what it asked of the checkpoints holds, a
  // rollback's count is the session's from now on. The facts for its reply; null for none.
  nlohmann::json settle_checkpoint(bool ok);
  void reset_budget(uint64_t limit) { budget_.reset(limit); }
  void set_budget(OutputBudget budget) { budget_ = budget; }
  // The request is the running one (there was none).
  Cell& begin(Cell cell);
  // The running request ends: returned, and none runs (throws std::logic_error when none ran).
  Cell end();

 private:
  std::optional<Cell> cell_;
  int execution_count_ = 0;
  Checkpoints checkpoints_;
  uint64_t requests_started_ = 0;  // source of the frame ids of requests
  OutputBudget budget_;
};

}  // namespace belljar
