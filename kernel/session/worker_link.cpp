// The supervisor's side of the worker: its frames, its output pipes, its exits and restarts.
// Everything read here comes from untrusted code and is checked before it reaches a client.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cmath>

#include "kernel/output/active_output.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/output/bundle_check.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/kernel.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/protocol/signer.hpp"

namespace belljar {

namespace {
const char* kStreamNames[] = {"stdout", "stderr"};

constexpr size_t kDrainBudget = 16u << 20;  // pipe bytes read in one go before a frame
constexpr size_t kMaxOutbox = 8u << 20;  // bytes queued for a worker that is not reading
constexpr auto kFramesEofGrace = std::chrono::seconds(2);
constexpr size_t kDisplaysAudited = 1000;   // mime lists kept per cell for the audit record
constexpr uint64_t kInputRequestCost = 64;  // what one input_request is charged, prompt aside

bool is_known_worker_frame(const std::string& type) {
  for (const char* known :
       {"display", "update_display", "result", "clear_output", "error", "input_request", "limits",
        "audit_request", "done", "complete_reply", "inspect_reply", "is_complete_reply"})
    if (type == known) return true;
  return false;
}

json object_or_empty(const json& frame, const char* key) {
  auto it = frame.find(key);
  return it != frame.end() && it->is_object() ? *it : json::object();
}

}  // namespace

void Kernel::start_worker() {
  worker_ready_ = false;
  // A new warden answers none of the old one's surveys.
  surveys_sent_ = surveys_answered_ = survey_gate_ = 0;
  held_frame_.reset();
  next_survey_.reset();
  decoder_ = WorkerFrameDecoder();
  outbox_.clear();
  frames_open_ = true;
  frames_eof_at_.reset();
  worker_started_ = Clock::now();
  try {
    worker_.emplace(WorkerProcess::start(options_.policy, options_.launch));
  } catch (const SandboxError& e) {
    worker_.reset();
    if (restarts_ == 0 && failed_starts_ == 0) throw;  // at launch: refuse to start
    start_error_ = std::string("the sandbox could not be started: ") + e.what();
    schedule_restart(start_error_);
    dispatch_next();  // fails queued cells with the reason
    return;
  }
  for (int fd : {worker_->frames_fd(), worker_->stdout_fd(), worker_->stderr_fd()})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  pipe_open_[0] = pipe_open_[1] = true;
  pipe_read_[0] = pipe_read_[1] = uncounted_[0] = uncounted_[1] = 0;
  // This sandbox's connections to 127.0.0.1:3128 arrive on its channel.
  if (egress_)
    if (Fd channel = worker_->take_egress_channel()) egress_->attach(std::move(channel));
  audit_.record("worker_start", {{"pid", worker_->pid()},
                                 {"isolation", isolation_name(options_.policy.isolation)},
                                 {"restart", restarts_}});
}

void Kernel::schedule_restart(const std::string& why) {
  // Back off when the worker keeps dying at once, so a broken interpreter can't spin us.
  ++failed_starts_;
  auto delay = std::chrono::milliseconds(std::min(5000, 50 << std::min(failed_starts_, 7)));
  log_line("worker restart in " + std::to_string(delay.count()) + " ms: " + why);
  restart_at_ = Clock::now() + delay;
}

void Kernel::send_to_worker(const json& frame) {
  if (!worker_ || !frames_open_) return;
  // An honest worker reads each reply before it asks again; one that keeps asking without
  // reading would grow this without end.
  if (outbox_.size() > kMaxOutbox)
    return fault_worker("it left " + human_bytes(outbox_.size()) + " of frames unread");
  outbox_ += encode_worker_frame(frame);
  flush_outbox();
}

void Kernel::fault_worker(const std::string& why) {
  // Past a bound the worker is at fault: it goes (its exit restarts the session), and nothing
  // more is read from or sent to it in the meantime.
  frame_log_.log("worker fault", why + "; restarting the worker");
  audit_.record("worker_fault", {{"fault", why}});
  frames_open_ = false;
  frames_eof_at_.reset();
  outbox_.clear();
  if (worker_) worker_->kill();
}

void Kernel::flush_outbox() {
  while (worker_ && frames_open_ && !outbox_.empty()) {
    ssize_t n = ::write(worker_->frames_fd(), outbox_.data(), outbox_.size());
    if (n > 0) {
      outbox_.erase(0, static_cast<size_t>(n));
    } else {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN) outbox_.clear();  // the worker is gone; its exit reports it
      return;
    }
  }
}

void Kernel::read_pipe(int index, size_t budget) {
  if (!worker_ || !pipe_open_[index]) return;
  int fd = index == 0 ? worker_->stdout_fd() : worker_->stderr_fd();
  char chunk[65536];
  size_t total = 0;
  while (total < budget) {
    // Never past the budget: before a frame, what lies beyond its cursor may follow it.
    ssize_t n = ::read(fd, chunk, std::min(sizeof chunk, budget - total));
    if (n > 0) {
      total += static_cast<size_t>(n);
      pipe_read_[index] += static_cast<uint64_t>(n);
      streams_[index].append(std::string_view(chunk, static_cast<size_t>(n)), budget_);
      if (streams_[index].due(Clock::now())) flush_streams(false);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) pipe_open_[index] = false;
    break;
  }
}

void Kernel::drain_pipes() {
  read_pipe(0, kDrainBudget);
  read_pipe(1, kDrainBudget);
}

void Kernel::read_output_before(const json& frame) {
  // The frame says how much its streams had written to fd 1 and fd 2 when it was sent: that
  // much is read and shown before it, and no more, so text printed just after the frame (the
  // next line of a clear_output loop) waits for the next turn. Bytes written around the
  // worker's streams (subprocesses, C code) are not counted, so the cursor is a lower bound,
  // corrected by what the pipes held beyond it at the last `done`; text read before the
  // frame, those bytes included, is always shown before it (see PROTOCOL.md).
  auto cursor = frame.find("written");
  bool counted = cursor != frame.end() && cursor->is_array() && cursor->size() == 2 &&
                 (*cursor)[0].is_number_unsigned() && (*cursor)[1].is_number_unsigned();
  for (int i = 0; counted && i < 2; ++i) {
    uint64_t target = (*cursor)[i].get<uint64_t>() + uncounted_[i];
    if (target > pipe_read_[i])
      read_pipe(i, static_cast<size_t>(std::min<uint64_t>(target - pipe_read_[i], kDrainBudget)));
  }
  flush_streams(true);
}

void Kernel::learn_uncounted_output(const json& done) {
  // At `done` the pipes were read to the end: what they held beyond the worker's count was
  // written around its streams, and later cursors are moved by that much.
  auto cursor = done.find("written");
  if (cursor == done.end() || !cursor->is_array() || cursor->size() != 2) return;
  for (int i = 0; i < 2; ++i) {
    if (!(*cursor)[i].is_number_unsigned()) return;
    uint64_t counted = (*cursor)[i].get<uint64_t>();
    uncounted_[i] = pipe_read_[i] > counted ? pipe_read_[i] - counted : 0;
  }
}

void Kernel::flush_streams(bool final) {
  const WireMessage* parent = cell_ ? &cell_->request : last_parent_ ? &*last_parent_ : nullptr;
  for (int i = 0; i < 2; ++i) {
    if (!streams_[i].pending()) continue;
    auto now = Clock::now();
    size_t cut = redactor_.cut_after_secrets(streams_[i].pending_text(), streams_[i].ready(final, now));
    std::string text = redactor_.redact(streams_[i].take_prefix(cut, now));
    if (!text.empty()) publish("stream", create_stream(kStreamNames[i], text), parent);
  }
}

void Kernel::read_frames() {
  char chunk[65536];
  for (int reads = 0; reads < 256 && worker_ && frames_open_; ++reads) {
    ssize_t n = ::read(worker_->frames_fd(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      // EOF, handled once: a half-closed socket stays readable forever, so it is no longer
      // polled. A worker that is ending exits now (its exit says why); one that closed its
      // end and kept running is at fault once the grace period is over.
      frames_open_ = false;
      frames_eof_at_ = Clock::now() + kFramesEofGrace;
      return;
    }
    if (n < 0) break;  // EAGAIN
    decoder_.feed(std::string_view(chunk, static_cast<size_t>(n)));
    while (worker_) {
      auto frame = decoder_.next();
      if (!frame) break;
      read_output_before(*frame);
      handle_frame(*frame);
    }
    if (worker_ && !decoder_.fault().empty()) return fault_worker(decoder_.fault());
  }
}

void Kernel::handle_frame(const json& frame) {
  const std::string& type = frame["type"].get_ref<const std::string&>();
  if (type == "hello") {
    if (worker_ready_) return frame_log_.log("worker frame dropped", "a second hello");
    // Built by the supervisor: the frontend loads codemirror_mode as a script path.
    auto info = frame.find("language_info");
    language_info_ = language_info_from_worker(info != frame.end() ? *info : json::object());
    worker_ready_ = true;
    background_.worker_ready(worker_->cpu_seconds());
    start_error_.clear();
    failed_starts_ = 0;
    dispatch_next();
    return;
  }
  if (!is_known_worker_frame(type))
    return frame_log_.log("worker sent an unknown frame type", type.substr(0, 64));
  if (!answers_current_request(frame)) {
    // Frames carry the id of the request they answer: a stale one (a delayed `done` after a
    // forged one, a thread's display after its cell ended) never lands in a later request.
    return frame_log_.log("worker frame dropped",
                          type + " for a request that is not the current one");
  }
  bool executing = this->executing();
  const WireMessage* parent = executing ? &cell_->request : nullptr;
  if (type == "display" || type == "update_display" || type == "result") {
    if (!executing) return;  // nothing to attribute it to
    auto data_it = frame.find("data");
    json data = data_it != frame.end() ? *data_it : json();
    json metadata = object_or_empty(frame, "metadata");
    json transient = object_or_empty(frame, "transient");
    std::optional<std::string> problem = bundle_problem(data);
    if (!problem && type == "update_display" && !transient.contains("display_id"))
      problem = "an update without a display_id";
    if (problem) {
      // Never forwarded: the client gets a plain explanation in its place.
      data = {{"text/plain", "[belljar] an invalid display was dropped: " + *problem}};
      metadata = json::object();
      if (type == "update_display") return;
    }
    redactor_.redact_json(data);  // before: the frame's srcdoc holds it escaped
    data = apply_active_output(data, options_.policy.active_output);
    redactor_.redact_json(data);  // after: decoded references could spell a secret
    // The whole message counts: metadata and transient are the worker's bytes too.
    if (!budget_.take_whole(dump_json(data).size() + dump_json(metadata).size() +
                            dump_json(transient).size()))
      return;  // over the output cap
    if (cell_->displays.size() < kDisplaysAudited) {
      json mimes = json::array();
      for (auto& [mime, value] : data.items()) mimes.push_back(mime);
      cell_->displays.push_back(mimes);
    }
    if (type == "result") {
      if (cell_->silent) return;
      if (auto text = data.find("text/plain"); text != data.end() && text->is_string()) cell_->result_text = *text;
      publish("execute_result", {{"execution_count", cell_->execution_count}, {"data", data}, {"metadata", metadata}}, parent);
    } else {
      publish(type == "display" ? "display_data" : "update_display_data",
              {{"data", data}, {"metadata", metadata}, {"transient", transient}}, parent);
    }
  } else if (type == "clear_output") {
    if (!executing) return;
    auto wait = frame.find("wait");
    json content = {{"wait", wait != frame.end() && wait->is_boolean() && wait->get<bool>()}};
    if (!budget_.take_whole(dump_json(content).size())) return;  // a flood of them is output too
    publish("clear_output", std::move(content), parent);
  } else if (type == "error") {
    if (!executing) return;
    // Once the cap is spent, a further error is not published (the reply still carries the
    // last one); the first error of a cell is always shown, cut to what the budget allows.
    bool publish_it = !cell_->error || !budget_.exhausted();
    json error = create_error_content("", "", json::array());
    for (const char* key : {"ename", "evalue", "traceback"})
      if (auto it = frame.find(key); it != frame.end()) error[key] = *it;
    redactor_.redact_json(error);
    error = charge_error(std::move(error), budget_);
    std::string ename = error["ename"], evalue = error["evalue"];
    json traceback = std::move(error["traceback"]);
    if (cell_->limit_hit == LimitHit::workspace) {
      ename = "WorkspaceQuotaError";
      evalue = "the session passed its --workspace-quota of " +
               human_bytes(options_.policy.workspace_quota_bytes) +
               " and the cell was interrupted; the workspace is read-only to the sandbox until "
               "files are removed; variables were kept";
      traceback.push_back(ename + ": " + evalue);
    } else if (cell_->limit_hit != LimitHit::none) {
      // The limit's interrupt surfaced as KeyboardInterrupt: name the limit instead.
      bool cpu = cell_->limit_hit == LimitHit::cpu;
      std::optional<double> asked = cpu ? cell_->magic_cpu : cell_->magic_timeout;
      char limit[64];
      std::snprintf(limit, sizeof limit, "%g s", asked ? *asked : cpu ? cell_->cpu_limit : cell_->timeout);
      ename = "TimeoutError";
      evalue = "the cell passed its " + std::string(cpu ? "CPU-time" : "wall-clock") + " limit of " +
               limit + " (" + (asked ? "%%limits " : "") + (cpu ? "--cpu" : "--timeout") +
               ") and was interrupted; variables were kept";
      if (cpu && cell_->background_cpu >= 0.05) {
        char spent[96];
        std::snprintf(spent, sizeof spent,
                      " (%.1f s of it spent between cells by code left running)",
                      cell_->background_cpu);
        evalue += spent;
      }
      traceback.push_back(ename + ": " + evalue);
    }
    cell_->error = create_error_content(ename, evalue, traceback);
    if (!cell_->silent && publish_it) publish("error", *cell_->error, parent);
  } else if (type == "input_request") {
    if (!executing) return;
    auto prompt = frame.find("prompt");
    auto password = frame.find("password");
    std::string text =
        prompt != frame.end() && prompt->is_string() ? prompt->get<std::string>() : "";
    json content = {
        {"prompt", charge_text(redactor_.redact(text), budget_)},
        {"password", password != frame.end() && password->is_boolean() && password->get<bool>()}};
    if (!cell_->allow_stdin) {
      send_to_worker({{"type", "input_reply"}, {"error", "this frontend does not support input requests"}});
      return;
    }
    // Each request is a message to the client: a loop of them is output like any other.
    if (!budget_.take_whole(kInputRequestCost)) {
      send_to_worker({{"type", "input_reply"}, {"error", "the cell's output limit was reached"}});
      return;
    }
    frontend_->request_input(cell_->request, content);
  } else if (type == "limits") {
    if (executing) handle_limits(frame);
  } else if (type == "audit_request") {
    // The learner's own cells, as the supervisor recorded them (the worker can't forge them).
    if (!executing) return;
    size_t last = 10;
    if (auto n = frame.find("last"); n != frame.end() && n->is_number_unsigned())
      last = std::min<size_t>(n->get<size_t>(), recent_cells_.size());
    last = std::min(last, recent_cells_.size());
    json records = json::array();
    for (auto it = recent_cells_.end() - static_cast<long>(last); it != recent_cells_.end(); ++it)
      records.push_back(*it);
    send_to_worker({{"type", "audit_reply"}, {"records", records}});
  } else if (type == "done") {
    if (executing) finish_cell(frame);
  } else if (type == "complete_reply" || type == "inspect_reply" || type == "is_complete_reply") {
    if (worker_answer(cell_->kind) == type) finish_request_reply(frame);
  }
}

bool Kernel::answers_current_request(const json& frame) const {
  auto id = frame.find("id");
  return cell_ && id != frame.end() && id->is_string() &&
         id->get_ref<const std::string&>() == cell_->id;
}

void Kernel::handle_limits(const json& frame) {
  // %%limits may only tighten: the worker asks, the supervisor decides and enforces.
  const auto& policy = options_.policy;
  std::string refused;
  auto number = [&](const char* key) -> std::optional<double> {
    auto it = frame.find(key);
    if (it == frame.end()) return std::nullopt;
    if (!it->is_number() || it->get<double>() <= 0) {
      refused = std::string("--") + key + " must be a positive number";
      return std::nullopt;
    }
    return it->get<double>();
  };
  auto timeout = number("timeout");
  auto cpu = number("cpu");
  auto output = number("output_limit");
  auto memory = number("memory");
  char text[160];
  if (refused.empty() && timeout && *timeout > policy.timeout_seconds) {
    std::snprintf(text, sizeof text, "--timeout %g asks for more than this kernel's policy allows (%g s)", *timeout, policy.timeout_seconds);
    refused = text;
  } else if (refused.empty() && cpu && *cpu > policy.cpu_limit()) {
    std::snprintf(text, sizeof text, "--cpu %g asks for more than this kernel's policy allows (%g s)", *cpu, policy.cpu_limit());
    refused = text;
  } else if (refused.empty() && output && *output > double(policy.output_limit_bytes)) {
    refused = "--output-limit asks for more than this kernel's policy allows (" + human_bytes(policy.output_limit_bytes) + ")";
  } else if (refused.empty() && memory && *memory > double(policy.memory_bytes)) {
    refused = "--memory asks for more than this kernel's policy allows (" + human_bytes(policy.memory_bytes) + ")";
  } else if (refused.empty() && memory) {
    std::string why;
    if (!worker_ || !worker_->set_memory_limit(static_cast<uint64_t>(*memory), &why))
      refused = "--memory can't be set for this cell: " + why;
    else
      cell_->memory_limit = static_cast<uint64_t>(*memory);
  }
  if (!refused.empty()) {
    send_to_worker({{"type", "limits_reply"}, {"ok", false}, {"error", refused}});
    return;
  }
  cell_->magic_timeout = timeout;
  cell_->magic_cpu = cpu;
  if (timeout) cell_->timeout = std::min(cell_->timeout, *timeout + std::chrono::duration<double>(Clock::now() - cell_->started).count());
  if (cpu) cell_->cpu_limit = std::min(cell_->cpu_limit, *cpu);
  // Lower only, keeping what the cell already used: a forged frame can't buy more output.
  if (output) budget_.lower(static_cast<uint64_t>(*output));
  send_to_worker({{"type", "limits_reply"}, {"ok", true}});
}

json Kernel::execution_facts() const {
  double wall = std::chrono::duration<double, std::milli>(Clock::now() - cell_->started).count();
  double cpu = worker_ ? (worker_->cpu_seconds() - cell_->cpu_at_start) * 1000 : 0;
  return {{"wall_ms", std::round(wall * 10) / 10},
          {"cpu_ms", std::round(std::max(0.0, cpu) * 10) / 10},
          {"background_cpu_ms", std::round(cell_->background_cpu * 10000) / 10},
          {"peak_memory_bytes", worker_ ? worker_->peak_memory_bytes() : 0},
          {"limits", {{"timeout_seconds", cell_->timeout},
                      {"cpu_seconds", cell_->cpu_limit},
                      {"memory_bytes", options_.policy.memory_bytes},
                      {"output_limit_bytes", budget_.limit()}}},
          {"limit_hit", cell_->limit_hit == LimitHit::none ? json(nullptr)
                                                          : json(limit_name(cell_->limit_hit))},
          {"output_truncated", budget_.dropped() > 0},
          {"output_bytes", {{"stdout", streams_[0].total_bytes()}, {"stderr", streams_[1].total_bytes()}}},
          {"egress_denied", cell_->egress_denied}};
}

void Kernel::finish_cell(const json& done) {
  drain_pipes();  // the cell is over: everything its code wrote is shown before the reply
  learn_uncounted_output(done);
  flush_streams(true);
  handle_egress();  // decisions still queued belong to this cell
  Cell& cell = *cell_;
  if (cell.memory_limit && worker_) {
    std::string why;
    if (!worker_->set_memory_limit(options_.policy.memory_bytes, &why)) log_line("restoring --memory: " + why);
  }
  std::string_view status = status_name(cell.error ? CellStatus::error : CellStatus::ok);
  json content;
  if (cell.error) {
    content = create_execute_reply_error(cell.execution_count, *cell.error);
  } else {
    // user_expressions (what read_file and agents use) and pager payloads are output too.
    json expressions = object_or_empty(done, "user_expressions");
    json payload = done.contains("payload") ? done["payload"] : json::array();
    redactor_.redact_json(expressions);
    redactor_.redact_json(payload);
    apply_active_output_within(expressions, options_.policy.active_output);
    apply_active_output_within(payload, options_.policy.active_output);
    redactor_.redact_json(expressions);
    redactor_.redact_json(payload);
    // Charged like any output: the worker chose their size (read_file chunks stay far below).
    expressions = charge_user_expressions(expressions, cell.expressions_asked, budget_);
    payload = charge_payload(payload, budget_);
    content = create_execute_reply_ok(cell.execution_count, std::move(expressions), std::move(payload));
  }
  if (budget_.dropped() > 0) {
    publish(
        "stream",
        create_stream("stderr", "\n[belljar] output limit of " + human_bytes(budget_.limit()) +
                                    " reached: " + human_bytes(budget_.dropped()) + " dropped\n"),
        &cell.request);
  }
  json facts = execution_facts();
  if (cell.memory_limit) facts["limits"]["memory_bytes"] = cell.memory_limit;
  json metadata = {{"started", cell.started_iso}, {"dependencies_met", true},
                   {"engine", options_.session_id}, {"status", status}, {"belljar", facts}};
  if (cell.store_history) history_.add(cell.execution_count, cell.code, cell.result_text);
  CellStatus audit_status = cell.outcome ? *cell.outcome
                                         : status_for(cell.limit_hit, cell.error.has_value(),
                                                      cell.user_interrupted);
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
  if (cell.error) record["ename"] = (*cell.error)["ename"];
  if (options_.policy.audit_code) record["code"] = redactor_.redact(cell.code);
  audit_.record("cell", record);
  recent_cells_.push_back(record);
  if (recent_cells_.size() > 1000) recent_cells_.pop_front();
  metrics_.cell(audit_status, facts["wall_ms"].get<double>() / 1000, budget_.dropped() > 0,
                cell.limit_hit);
  metrics_.flush(Clock::now(), true);  // the reply's facts are in the file when the client has it
  bool abort = cell.error && cell.stop_on_error;
  if (abort) {
    collecting_ = true;
    frontend_->collect_pending(*this);
    collecting_ = false;
  }
  WireMessage request = std::move(cell.request);
  cell_.reset();
  if (worker_) background_.request_finished(worker_->cpu_seconds(), true);
  reply(Channel::shell, request, "execute_reply", std::move(content), std::move(metadata));
  publish_status("idle", &request);
  if (abort) abort_queued_executes();
  dispatch_next();
}

void Kernel::finish_request_reply(const json& frame) {
  WireMessage request = std::move(cell_->request);
  RequestKind kind = cell_->kind;
  cell_.reset();
  if (worker_) background_.request_finished(worker_->cpu_seconds(), false);
  // A lookup gets the same cap as a cell, on its own budget (it is not a cell's output).
  OutputBudget budget;
  budget.reset(options_.policy.output_limit_bytes);
  if (kind == RequestKind::complete)
    reply(Channel::shell, request, "complete_reply",
          charge_request_reply(kind, create_complete_reply(frame), budget));
  else if (kind == RequestKind::inspect) {
    // The inspector renders its bundle like an output (JupyterLab shows text/html).
    json content = create_inspect_reply(frame);
    if (!content["data"].empty())
      content["data"] = apply_active_output(content["data"], options_.policy.active_output);
    reply(Channel::shell, request, "inspect_reply", charge_request_reply(kind, content, budget));
  }
  else
    reply(Channel::shell, request, "is_complete_reply",
          charge_request_reply(kind, create_is_complete_reply(frame), budget));
  publish_status("idle", &request);
  dispatch_next();
}

void Kernel::fail_cell(const std::string& ename, const std::string& evalue, CellStatus outcome) {
  if (!cell_) return;
  if (!executing()) {
    // complete/inspect/is_complete: answer with nothing found rather than leaving it waiting.
    finish_request_reply(json::object());
    return;
  }
  cell_->outcome = outcome;
  cell_->error = create_error_content(ename, evalue, json::array({ename + ": " + evalue}));
  if (!cell_->silent) publish("error", *cell_->error, &cell_->request);
  finish_cell(json::object());
}

void Kernel::on_worker_exit(const WorkerExit& exit) {
  drain_pipes();
  flush_streams(true);
  std::string cause = exit.describe();
  audit_.record("worker_exit", {{"cause", cause}, {"memory_limit", exit.memory_limit},
                                {"during_cell", cell_.has_value()}});
  bool was_ready = worker_ready_;
  worker_.reset();
  worker_ready_ = false;
  ++restarts_;
  metrics_.restart();
  if (shutting_down_) return;
  if (was_ready) {
    failed_starts_ = 0;
    start_worker();
  } else {
    start_error_ = "the Python worker exited before it was ready (" + cause + ")";
    schedule_restart(start_error_);
    dispatch_next();  // fails queued cells with the reason
  }
  if (cell_) {
    if (executing() && cell_->kill_at && cell_->limit_hit == LimitHit::workspace) {
      fail_cell("WorkspaceQuotaError",
                "the session passed its --workspace-quota and the cell ignored the interrupt for "
                "2 s: the sandbox was restarted; variables were lost, workspace files were kept",
                CellStatus::workspace_quota);
    } else if (executing() && cell_->kill_at) {
      fail_cell("TimeoutError",
                "the cell passed its " + std::string(cell_->limit_hit == LimitHit::cpu ? "CPU-time" : "wall-clock") +
                " limit and ignored the interrupt for 2 s: the sandbox was restarted; variables "
                "were lost, workspace files were kept", CellStatus::timeout);
    } else if (exit.memory_limit) {
      if (executing()) cell_->limit_hit = LimitHit::memory;
      fail_cell("MemoryError", "the session passed its memory limit of " +
                                   human_bytes(cell_->memory_limit ? cell_->memory_limit : options_.policy.memory_bytes) +
                                   (cell_->memory_limit ? " (%%limits --memory)" : " (--memory)") +
                                   (exit.memory_total_bytes ? ": its processes held " + human_bytes(exit.memory_total_bytes) + " together" : "") +
                                   "; the worker was restarted: variables were lost, "
                                   "workspace files were kept", CellStatus::memory);
    } else {
      fail_cell("WorkerDied", "the Python worker died (" + cause +
                                  "); a fresh worker was started: variables were lost, "
                                  "workspace files were kept", CellStatus::crashed);
    }
  }
}

void Kernel::restart_worker(const std::string& why) {
  // Output already in the pipes belongs to the old session: deliver it before it goes.
  drain_pipes();
  flush_streams(true);
  audit_.record("worker_restart", {{"reason", why}, {"during_cell", cell_.has_value()}});
  drop_worker();
  worker_ready_ = false;
  restart_at_.reset();
  ++restarts_;  // a start failure from here on is retried, not a refusal to start
  metrics_.restart();
  if (cell_)
    fail_cell("WorkerDied", "the session was reset (" + why + "): variables were lost, "
              "workspace files were kept", CellStatus::crashed);
  if (shutting_down_) return;
  failed_starts_ = 0;
  start_worker();
}

void Kernel::drop_worker() {
  if (!worker_) return;
  worker_->kill();
  worker_.reset();
}

}  // namespace belljar
