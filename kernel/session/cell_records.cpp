// What a finished request leaves behind: the execute_reply with its facts (metadata.belljar),
// the audit log's `cell` record and the metrics, history, the stop_on_error abort; the reply of
// a lookup; a cell failed by the supervisor; and the restart policy (back off while the worker
// keeps dying at once). Everything the worker sent is charged and redacted before it is kept.
#include <algorithm>
#include <cmath>

#include "kernel/output/active_output.hpp"
#include "kernel/output/payloads.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/protocol/signer.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/kernel.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

json Kernel::execution_facts() const {
  double wall = std::chrono::duration<double, std::milli>(Clock::now() - cell_->started).count();
  double cpu = worker_ ? (worker_->cpu_seconds() - cell_->cpu_at_start) * 1000 : 0;
  json facts = {
      {"wall_ms", std::round(wall * 10) / 10},
      {"cpu_ms", std::round(std::max(0.0, cpu) * 10) / 10},
      {"background_cpu_ms", std::round(cell_->background_cpu * 10000) / 10},
      {"peak_memory_bytes", worker_ ? worker_->peak_memory_bytes() : 0},
      {"limits",
       {{"timeout_seconds", cell_->timeout},
        {"cpu_seconds", cell_->cpu_limit},
        {"memory_bytes", options_.policy.memory_bytes},
        {"output_limit_bytes", budget_.limit()}}},
      {"limit_hit",
       cell_->limit_hit == LimitHit::none ? json(nullptr) : json(limit_name(cell_->limit_hit))},
      {"output_truncated", budget_.dropped() > 0},
      {"output_bytes",
       {{"stdout", worker_link_.total_bytes(0)}, {"stderr", worker_link_.total_bytes(1)}}},
      {"egress_denied", cell_->egress.denied}};
  if (json secrets = secret_totals(); !secrets.is_null()) facts["secrets"] = secrets;
  return facts;
}

// belljar.secrets: the cell's requests to hosts with a bound secret; null when it made none.
json Kernel::secret_totals() const {
  const auto& totals = cell_->egress.secrets;
  if (totals.requests == 0) return nullptr;
  return {{"requests", totals.requests},
          {"injected", totals.injected},
          {"latency_ms", std::round(totals.latency_ms * 10) / 10},
          {"input_tokens", totals.input_tokens},
          {"output_tokens", totals.output_tokens}};
}

void Kernel::finish_cell(const json& done) {
  // The cell is over: everything its code wrote is shown before the reply.
  worker_link_.drain_pipes();
  worker_link_.learn_at_done(done);
  worker_link_.flush_streams(true);
  comms_.tell_drops(*cell_);
  handle_egress();  // decisions still queued belong to this cell
  // And the workspace broker's refusals: each was sent before its call returned in the cell.
  if (worker_) workspace_.take_refusals(*worker_, &cell_.value());
  Cell& cell = *cell_;
  if (cell.memory_limit && worker_) {
    std::string why;
    if (!worker_->set_memory_limit(options_.policy.memory_bytes, &why))
      log_line("restoring --memory: " + why);
  }
  std::string_view status = status_name(cell.error ? CellStatus::error : CellStatus::ok);
  json content;
  if (cell.error) {
    content = create_execute_reply_error(cell.execution_count, *cell.error);
  } else {
    // user_expressions (what read_file and agents use) and pager payloads are output too.
    auto sent = done.find("user_expressions");
    json expressions = sent != done.end() && sent->is_object() ? *sent : json::object();
    CheckedPayload checked = checked_payload(done.value("payload", json()));
    if (checked.dropped > 0)
      frame_log_.log("payload items dropped",
                     std::to_string(checked.dropped) + " not of a source's shape");
    json payload = std::move(checked.items);
    redactor_.redact_json(expressions);
    redactor_.redact_json(payload);
    apply_active_output_within(expressions, options_.policy.active_output);
    apply_active_output_within(payload, options_.policy.active_output);
    redactor_.redact_json(expressions);
    redactor_.redact_json(payload);
    // Charged like any output: the worker chose their size (read_file chunks stay far below).
    expressions = charge_user_expressions(expressions, cell.expressions_asked, budget_);
    payload = charge_payload(payload, budget_);
    content =
        create_execute_reply_ok(cell.execution_count, std::move(expressions), std::move(payload));
  }
  if (budget_.dropped() > 0) {
    client_.publish(
        "stream",
        create_stream("stderr", "\n[belljar] output limit of " + format_size(budget_.limit()) +
                                    " reached: " + format_size(budget_.dropped()) + " dropped\n"),
        &cell.request);
  }
  json facts = execution_facts();
  if (cell.memory_limit) facts["limits"]["memory_bytes"] = cell.memory_limit;
  json metadata = {{"started", cell.started_iso},
                   {"dependencies_met", true},
                   {"engine", options_.session_id},
                   {"status", status},
                   {"belljar", facts}};
  if (cell.store_history) history_.add(cell.execution_count, cell.code, cell.result_text);
  CellStatus audit_status =
      cell.outcome ? *cell.outcome
                   : status_for(cell.limit_hit, cell.error.has_value(), cell.user_interrupted);
  json record = {{"client_session", cell.request.header.value("session", "")},
                 {"msg_id", cell.request.id()},
                 {"execution_count", cell.execution_count},
                 {"code_sha256", sha256_hex(cell.code)},
                 {"code_bytes", cell.code.size()},
                 {"start", cell.started_iso},
                 {"status", status_name(audit_status)},
                 {"wall_ms", facts["wall_ms"]},
                 {"cpu_ms", facts["cpu_ms"]},
                 {"peak_memory_bytes", facts["peak_memory_bytes"]},
                 {"output_bytes", facts["output_bytes"]},
                 {"output_dropped_bytes", budget_.dropped()},
                 {"truncated", budget_.dropped() > 0},
                 {"limit_hit", facts["limit_hit"]},
                 {"displays", cell.displays}};
  if (facts.contains("secrets")) record["secrets"] = facts["secrets"];
  // Time paused in the debugger (debug_link.hpp), which --timeout did not count up to
  // --debug-pause.
  cell.paused.resume(Clock::now());
  if (double paused = cell.paused.total(Clock::now()); paused > 0)
    record["paused_seconds"] = std::round(paused * 1000) / 1000;
  // Comm messages whose handlers ran while the cell awaited: their time and output are the
  // cell's (comms_during_cell.hpp).
  if (uint64_t comms = comms_.take_handled(); comms > 0) record["comms_handled"] = comms;
  if (cell.error) record["ename"] = (*cell.error)["ename"];
  if (options_.policy.audit_code) record["code"] = redactor_.redact(cell.code);
  std::string recorded = dump_json(record);
  recorded.shrink_to_fit();  // kept for 1000 cells: not with the slack of its last append
  size_t recorded_bytes = recorded.size();
  recent_cells_.push(std::move(recorded), recorded_bytes);
  audit_.record("cell", std::move(record));
  metrics_.cell(audit_status, facts["wall_ms"].get<double>() / 1000, budget_.dropped() > 0,
                cell.limit_hit);
  metrics_.flush(Clock::now(), true);  // the reply's facts are in the file when the client has it
  bool abort = cell.error && cell.stop_on_error;
  if (abort) {
    queue_.set_collecting(true);
    client_.frontend()->collect_pending(*this);
    queue_.set_collecting(false);
  }
  WireMessage request = std::move(cell.request);
  cell_.reset();
  if (worker_) limits_.request_finished(worker_->cpu_seconds(), true);
  client_.reply(Channel::shell, request, "execute_reply", std::move(content), std::move(metadata));
  client_.status("idle", &request);
  if (abort) abort_queued_executes();
  queue_.push_shell_first(comms_.take_back());  // comm messages that came during the cell first
  dispatch_next();
}

void Kernel::finish_request_reply(const json& frame) {
  if (cell_->kind == RequestKind::comm) {
    worker_link_.drain_pipes();  // what the handler wrote is shown before its idle, as a cell's
    worker_link_.learn_at_done(frame);
    worker_link_.flush_streams(true);
    comms_.handler_finished(*cell_, budget_);
    WireMessage request = std::move(cell_->request);
    cell_.reset();
    if (worker_) limits_.request_finished(worker_->cpu_seconds(), false);
    client_.status("idle", &request);
    dispatch_next();
    return;
  }
  WireMessage request = std::move(cell_->request);
  RequestKind kind = cell_->kind;
  cell_.reset();
  if (worker_) limits_.request_finished(worker_->cpu_seconds(), false);
  // A lookup gets the same cap as a cell, on its own budget (it is not a cell's output).
  OutputBudget budget;
  budget.reset(options_.policy.output_limit_bytes);
  if (kind == RequestKind::complete)
    client_.reply(Channel::shell, request, "complete_reply",
                  charge_request_reply(kind, create_complete_reply(frame), budget));
  else if (kind == RequestKind::inspect) {
    // The inspector renders its bundle like an output (JupyterLab shows text/html).
    json content = create_inspect_reply(frame);
    if (!content["data"].empty())
      content["data"] = apply_active_output(content["data"], options_.policy.active_output);
    client_.reply(Channel::shell, request, "inspect_reply",
                  charge_request_reply(kind, content, budget));
  } else if (kind == RequestKind::comm_info) {
    json content = comms_.info(frame);
    if (!budget.take_whole(dump_json(content).size())) content["comms"] = json::object();
    client_.reply(Channel::shell, request, "comm_info_reply", std::move(content));
  } else
    client_.reply(Channel::shell, request, "is_complete_reply",
                  charge_request_reply(kind, create_is_complete_reply(frame), budget));
  client_.status("idle", &request);
  dispatch_next();
}

void Kernel::fail_cell(const std::string& ename, const std::string& evalue, CellStatus outcome) {
  if (!cell_) return;
  if (!executing()) {
    if (cell_->kind == RequestKind::comm)
      comms_.tell_session_lost_by_handler(ename + ": " + evalue, cell_->request);
    // complete/inspect/is_complete: answer with nothing found rather than leaving it waiting.
    finish_request_reply(json::object());
    return;
  }
  cell_->outcome = outcome;
  cell_->error = create_error_content(ename, evalue, json::array({ename + ": " + evalue}));
  if (!cell_->silent) client_.publish("error", *cell_->error, &cell_->request);
  finish_cell(json::object());
}

void Kernel::schedule_restart(const std::string& why) {
  // Back off when the worker keeps dying at once, so a broken interpreter can't spin us.
  ++failed_starts_;
  auto delay = std::chrono::milliseconds(std::min(5000, 50 << std::min(failed_starts_, 7)));
  log_line("worker restart in " + std::to_string(delay.count()) + " ms: " + why);
  restart_at_ = Clock::now() + delay;
}

}  // namespace belljar
