#include "kernel/session/cell_records.hpp"

#include <algorithm>
#include <cmath>

#include "kernel/output/active_output.hpp"
#include "kernel/output/payloads.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/protocol/signer.hpp"
#include "kernel/session/cell_budget.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {

// belljar.secrets: the cell's requests to hosts with a bound secret; null when it made none.
json secret_totals(const Cell& cell) {
  const auto& totals = cell.egress.secrets;
  if (totals.requests == 0) return nullptr;
  return {{"requests", totals.requests},
          {"injected", totals.injected},
          {"latency_ms", std::round(totals.latency_ms * 10) / 10},
          {"input_tokens", totals.input_tokens},
          {"output_tokens", totals.output_tokens}};
}

}  // namespace

json CellRecords::facts(const Cell& cell, const Measured& measured,
                        const OutputBudget& budget) const {
  double wall = std::chrono::duration<double, std::milli>(Clock::now() - cell.started).count();
  json facts = {
      {"wall_ms", std::round(wall * 10) / 10},
      {"cpu_ms", std::round(std::max(0.0, measured.cpu_seconds * 1000) * 10) / 10},
      {"background_cpu_ms", std::round(cell.background_cpu * 10000) / 10},
      {"peak_memory_bytes", measured.peak_memory_bytes},
      {"limits",
       {{"timeout_seconds", cell.timeout},
        {"cpu_seconds", cell.cpu_limit},
        {"memory_bytes", cell.memory_limit ? cell.memory_limit : policy_.memory_bytes},
        {"output_limit_bytes", budget.limit()}}},
      {"limit_hit",
       cell.limit_hit == LimitHit::none ? json(nullptr) : json(limit_name(cell.limit_hit))},
      {"output_truncated", budget.dropped() > 0},
      {"output_bytes", {{"stdout", measured.stdout_bytes}, {"stderr", measured.stderr_bytes}}},
      {"egress_denied", cell.egress.denied}};
  if (json secrets = secret_totals(cell); !secrets.is_null()) facts["secrets"] = secrets;
  return facts;
}

json CellRecords::reply_content(const Cell& cell, const json& done, OutputBudget& budget) const {
  if (cell.error) return create_execute_reply_error(cell.execution_count, *cell.error);
  // user_expressions (what read_file and agents use) and pager payloads are output too.
  auto sent = done.find("user_expressions");
  json expressions = sent != done.end() && sent->is_object() ? *sent : json::object();
  CheckedPayload checked = checked_payload(done.value("payload", json()));
  if (checked.dropped > 0)
    log_.log("payload items dropped", std::to_string(checked.dropped) + " not of a source's shape");
  json payload = std::move(checked.items);
  redactor_.redact_json(expressions);
  redactor_.redact_json(payload);
  apply_active_output_within(expressions, policy_.active_output);
  apply_active_output_within(payload, policy_.active_output);
  redactor_.redact_json(expressions);
  redactor_.redact_json(payload);
  // Charged like any output: the worker chose their size (read_file chunks stay far below).
  expressions = charge_user_expressions(expressions, cell.expressions_asked, budget);
  payload = charge_payload(payload, budget);
  return create_execute_reply_ok(cell.execution_count, std::move(expressions), std::move(payload));
}

json CellRecords::record(Cell& cell, const json& facts, const Measured& measured,
                         const OutputBudget& budget, CellStatus status) const {
  json record = {{"client_session", cell.request.header.value("session", "")},
                 {"msg_id", cell.request.id()},
                 {"execution_count", cell.execution_count},
                 {"code_sha256", sha256_hex(cell.code)},
                 {"code_bytes", cell.code.size()},
                 {"start", cell.started_iso},
                 {"status", status_name(status)},
                 {"wall_ms", facts["wall_ms"]},
                 {"cpu_ms", facts["cpu_ms"]},
                 {"peak_memory_bytes", facts["peak_memory_bytes"]},
                 {"output_bytes", facts["output_bytes"]},
                 {"output_dropped_bytes", budget.dropped()},
                 {"truncated", budget.dropped() > 0},
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
  if (measured.comms_handled > 0) record["comms_handled"] = measured.comms_handled;
  if (cell.error) record["ename"] = (*cell.error)["ename"];
  if (policy_.audit_code) record["code"] = redactor_.redact(cell.code);
  return record;
}

CellRecords::Reply CellRecords::finish(Cell& cell, const json& done, const Measured& measured,
                                       OutputBudget& budget) {
  std::string_view status = status_name(cell.error ? CellStatus::error : CellStatus::ok);
  json content = reply_content(cell, done, budget);
  if (budget.dropped() > 0) {
    client_.publish(
        "stream",
        create_stream("stderr", "\n[belljar] output limit of " + format_size(budget.limit()) +
                                    " reached: " + format_size(budget.dropped()) + " dropped\n"),
        &cell.request);
  }
  json facts = this->facts(cell, measured, budget);
  json metadata = {{"started", cell.started_iso},
                   {"dependencies_met", true},
                   {"engine", session_id_},
                   {"status", status},
                   {"belljar", facts}};
  if (cell.store_history) history_.add(cell.execution_count, cell.code, cell.result_text);
  CellStatus audit_status =
      cell.outcome ? *cell.outcome
                   : status_for(cell.limit_hit, cell.error.has_value(), cell.user_interrupted);
  json record = this->record(cell, facts, measured, budget, audit_status);
  std::string recorded = dump_json(record);
  recorded.shrink_to_fit();  // kept for 100 cells: not with the slack of its last append
  size_t recorded_bytes = recorded.size();
  recent_.push(std::move(recorded), recorded_bytes);
  audit_.record("cell", std::move(record));
  metrics_.cell(audit_status, facts["wall_ms"].get<double>() / 1000, budget.dropped() > 0,
                cell.limit_hit);
  metrics_.flush(Clock::now(), true);  // the reply's facts are in the file when the client has it
  return {std::move(content), std::move(metadata)};
}

json CellRecords::recent(size_t last) const {
  last = std::min(last, recent_.size());
  json records = json::array();
  for (size_t i = recent_.size() - last; i < recent_.size(); ++i)
    records.push_back(json::parse(recent_[i], nullptr, false));  // our own dump_json
  return records;
}

}  // namespace belljar
