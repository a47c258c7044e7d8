// Jupyter requests: authenticated on arrival, control served at once, shell queued and handed
// to the worker one at a time (as ipykernel does), replies built by replies.hpp.
#include "kernel/output/active_output.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/kernel.hpp"
#include "kernel/session/kernel_info.hpp"
#include "kernel/session/request_starters.hpp"

namespace belljar {

void Kernel::submit_shell(WireMessage message) {
  if (comms_.takes_during_cell(message,
                               current_.executing() && current_.cell().in_worker && life_.ready() &&
                                   worker_link_.frames_open() && !queue_.collecting(),
                               queue_.holds_comm()))
    return comms_.arrive(std::move(message), current_.cell(),
                         current_.frame_ids());  // ahead of the queue
  queue_.push_shell(std::move(message));
  if (!queue_.collecting()) dispatch_next();
}

void Kernel::deliver_input(const std::string& value) {
  if (current_.executing())
    worker_link_.send({{"type", "input_reply"}, {"value", value}});
  else
    obs_.request_log.log("dropped input_reply", "no cell is waiting for input");
}

void Kernel::submit_control(const WireMessage& message) {
  try {
    serve_control(message);
  } catch (const std::exception& e) {
    request_failed(Channel::control, message, e);
  }
}

void Kernel::serve_control(const WireMessage& message) {
  std::string type = message.type();
  if (type == "debug_request") return debug_.serve(message);  // debug_link.hpp
  if (type == "kernel_info_request" && !life_.ready()) {
    queue_.push_control_first(message);  // answered once the worker says hello
    return;
  }
  client_.status("busy", &message);
  if (type == "interrupt_request") {
    interrupt_cell();
    client_.reply(Channel::control, message, "interrupt_reply", create_interrupt_reply());
  } else if (type == "shutdown_request") {
    bool restart = message.content.value("restart", false);
    client_.reply(Channel::control, message, "shutdown_reply", create_shutdown_reply(restart));
    client_.publish("shutdown_reply", create_shutdown_reply(restart), &message);
    request_shutdown();
  } else if (type == "kernel_info_request") {
    client_.reply(Channel::control, message, "kernel_info_reply",
                  kernel_info({options_.policy, life_, debug_.worker_debugger(), obs_.audit,
                               obs_.audit.destination(), obs_.audit.fallback()}));
  } else if (type == "usage_request") {
    client_.reply(
        Channel::control, message, "usage_reply",
        usage_.sample(worker_ ? worker_->worker_pid() : -1, worker_ ? worker_->cpu_seconds() : 0));
  } else {
    obs_.request_log.log("unsupported control message", type);
  }
  client_.status("idle", &message);
}

void Kernel::dispatch_next() {
  while (!current_.active() && !queue_.empty() && !shutting_down_) {
    std::string type = queue_.front().message.type();
    if ((request_kind(type) || type == "kernel_info_request") && !life_.ready()) {
      if (!life_.start_error().empty() && request_kind(type) == RequestKind::execute) {
        // No sandbox could be started: say so instead of leaving the request hanging.
        refuse_execute(queue_.take_front().message, "SandboxError", life_.start_error());
        continue;
      }
      return;  // waits for the worker's hello
    }
    QueuedRequest request = queue_.take_front();
    if (request.channel == Channel::shell && request_kind(type) == RequestKind::execute &&
        options_.policy.audit_required && obs_.audit.failures() > 0) {
      // --audit-required: a cell that could run unrecorded does not run at all.
      refuse_execute(
          request.message, "AuditLogError",
          obs_.audit.failure_text() + "; --audit-required refuses cells until it is fixed");
      continue;
    }
    if (request.channel == Channel::control) {
      submit_control(request.message);
      continue;
    }
    // One request is one boundary: a field of a shape no check foresaw fails that request
    // (an error reply, logged), never the kernel.
    try {
      if (request_kind(type))
        start_request(request.message);
      else
        answer_locally(request.channel, request.message);
    } catch (const std::exception& e) {
      if (current_.active() && current_.cell().request.id() == request.message.id() &&
          current_.cell().request.header == request.message.header)
        current_.end();  // the half-started request: the worker's answers to it are stale
      request_failed(request.channel, request.message, e);
    }
  }
}

void Kernel::request_failed(Channel channel, const WireMessage& message, const std::exception& e) {
  std::string type = message.type();
  obs_.request_log.log("request failed",
                       type.substr(0, 64) + ": " + std::string(e.what()).substr(0, 200));
  // A request that expects a reply gets one, with status error, so the client is not left
  // waiting; comm messages and input replies expect none.
  constexpr std::string_view kRequest = "_request";
  if (type.size() > kRequest.size() && type.ends_with(kRequest)) {
    std::string reply_type = type.substr(0, type.size() - kRequest.size()) + "_reply";
    std::string why = "the kernel could not handle this " + type + ": " + e.what();
    json content = create_error_content("KernelError", why, json::array({why}));
    content["status"] = "error";
    if (type == "execute_request") content["execution_count"] = current_.execution_count();
    client_.reply(channel, message, reply_type, std::move(content));
  }
  client_.status("idle", &message);
}

void Kernel::refuse_execute(const WireMessage& request, const std::string& ename,
                            const std::string& evalue) {
  client_.status("busy", &request);
  json error = create_error_content(ename, evalue, json::array({evalue}));
  client_.publish("error", error, &request);
  client_.reply(Channel::shell, request, "execute_reply",
                create_execute_reply_error(current_.execution_count(), error));
  client_.status("idle", &request);
}

void Kernel::answer_locally(Channel channel, const WireMessage& message) {
  std::string type = message.type();
  client_.status("busy", &message);
  if (type == "kernel_info_request") {
    client_.reply(channel, message, "kernel_info_reply",
                  kernel_info({options_.policy, life_, debug_.worker_debugger(), obs_.audit,
                               obs_.audit.destination(), obs_.audit.fallback()}));
  } else if (type == "connect_request" && !client_.frontend()->connection_ports().is_null()) {
    // Deprecated since protocol 5.1, still asked by older clients: the ports bound.
    client_.reply(channel, message, "connect_reply", client_.frontend()->connection_ports());
  } else if (type == "history_request") {
    client_.reply(channel, message, "history_reply",
                  create_history_reply(records_.history(message.content)));
  } else if (type == "shutdown_request") {
    bool restart = message.content.value("restart", false);
    client_.reply(channel, message, "shutdown_reply", create_shutdown_reply(restart));
    request_shutdown();
  } else {
    obs_.request_log.log("unsupported shell message", type);
  }
  client_.status("idle", &message);
}

void Kernel::start_request(const WireMessage& message) {
  take_output_between_requests();  // idle_link.hpp
  Cell cell;
  cell.request = message;
  cell.kind = *request_kind(message.type());  // dispatch_next sends only these here
  // The supervisor's own id, never reused: a frame naming an earlier one is stale, whatever
  // msg_id a client chose.
  cell.id = current_.fresh_id();
  cell.started = Clock::now();
  cell.started_iso = iso8601_now();
  client_.status("busy", &message);
  // CPU the session spent since the last cell ended, with no request running, is charged to
  // this cell (background_cpu.hpp).
  double cpu_now = worker_->cpu_seconds();
  RequestStart start{message,        cell, current_, cpu_now, limits_.request_started(cpu_now),
                     debug_.paused()};
  // Its kind's starter (request_starters.hpp): the frame, or null when it does not start.
  json frame = start_request_frame(
      {client_, comms_, obs_.request_log, checks_.redactor(), options_.policy}, start);
  if (frame.is_null()) return;
  current_.begin(std::move(cell));
  if (current_.running_code()) worker_link_.reset_totals();  // its text is counted from here
  // The sandbox this cell was meant for was stopped between cells: say so instead of running
  // it in a fresh session as if nothing had happened.
  if (auto why = current_.executing() ? limits_.take_background_stop() : std::nullopt) {
    current_.cell().limit_hit = LimitHit::cpu;
    fail_cell("TimeoutError", *why + "; this cell did not run: run it again", CellStatus::timeout);
    return;
  }
  // Files that appeared since the last cell are guarded first (workspace_link.hpp).
  if (current_.executing() && worker_ && workspace_.hold(*worker_, frame)) return;
  hand_to_worker(frame);
}

// What the worker sent and wrote before a request was sent to it came between requests: shown as
// such, never as the request's own output, so a task's flood does not eat a cell's budget. (What
// it writes after, until it reads the request, is the request's, as a thread's text is.) Frames
// are read only while no request runs: none of them can then end one.
void Kernel::take_output_between_requests() {
  if (!worker_ || current_.active()) return;
  worker_link_.read_frames();
  worker_link_.drain_pipes();
  worker_link_.flush_streams(true);
}

void Kernel::hand_to_worker(const json& frame) {
  if (current_.active() && !current_.cell().in_worker) {
    worker_link_
        .drain_pipes();  // written while the cell was held for its survey: still between requests
    worker_link_.flush_streams(true);
    current_.cell().in_worker = true;
    idle_.handed(current_.cell().request, current_.cell().kind);
  }
  worker_link_.send(frame);
}

void Kernel::finish_cell(const json& done) {
  // The cell is over: everything its code wrote is shown before the reply.
  worker_link_.drain_pipes();
  worker_link_.learn_at_done(done);
  worker_link_.flush_streams(true);
  comms_.tell_drops(current_.cell());
  handle_egress();  // decisions still queued belong to this cell
  // And the workspace broker's refusals: each was sent before its call returned in the cell.
  if (worker_) workspace_.take_refusals(*worker_, &current_.cell());
  Cell& cell = current_.cell();
  if (cell.memory_limit && worker_) {
    std::string why;
    if (!worker_->set_memory_limit(options_.policy.memory_bytes, &why))
      log_line("restoring --memory: " + why);
  }
  CellRecords::Measured measured;
  if (worker_) {
    measured.cpu_seconds = worker_->cpu_seconds() - cell.cpu_at_start;
    measured.peak_memory_bytes = worker_->peak_memory_bytes();
  }
  measured.stdout_bytes = worker_link_.total_bytes(0);
  measured.stderr_bytes = worker_link_.total_bytes(1);
  measured.comms_handled = comms_.take_handled();
  CellRecords::Reply reply = records_.finish(cell, done, measured, current_.budget());
  if (json checkpoint = current_.settle_checkpoint(!cell.error); !checkpoint.is_null()) {
    obs_.audit.record("checkpoint", checkpoint);
    reply.metadata["belljar"]["checkpoint"] = std::move(checkpoint);
  }
  bool abort = cell.error && cell.stop_on_error;
  if (abort) {
    queue_.set_collecting(true);
    client_.frontend()->collect_pending(*this);
    queue_.set_collecting(false);
  }
  WireMessage request = current_.end().request;
  if (worker_) limits_.request_finished(worker_->cpu_seconds(), true);
  client_.reply(Channel::shell, request, "execute_reply", std::move(reply.content),
                std::move(reply.metadata));
  client_.status("idle", &request);
  if (abort) abort_queued_executes();
  queue_.push_shell_first(comms_.take_back());  // comm messages that came during the cell first
  dispatch_next();
}

void Kernel::finish_request_reply(const json& frame) {
  if (current_.cell().kind == RequestKind::comm) {
    worker_link_.drain_pipes();  // what the handler wrote is shown before its idle, as a cell's
    worker_link_.learn_at_done(frame);
    worker_link_.flush_streams(true);
    comms_.handler_finished(current_.cell(), current_.budget());
    WireMessage request = current_.end().request;
    if (worker_) limits_.request_finished(worker_->cpu_seconds(), false);
    client_.status("idle", &request);
    dispatch_next();
    return;
  }
  Cell ended = current_.end();
  WireMessage request = std::move(ended.request);
  RequestKind kind = ended.kind;
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
  if (!current_.active()) return;
  if (!current_.executing()) {
    if (current_.cell().kind == RequestKind::comm)
      comms_.tell_session_lost_by_handler(ename + ": " + evalue, current_.cell().request);
    // complete/inspect/is_complete: answer with nothing found rather than leaving it waiting.
    finish_request_reply(json::object());
    return;
  }
  current_.cell().outcome = outcome;
  current_.cell().error = create_error_content(ename, evalue, json::array({ename + ": " + evalue}));
  if (!current_.cell().silent)
    client_.publish("error", *current_.cell().error, &current_.cell().request);
  finish_cell(json::object());
}

void Kernel::abort_queued_executes() {
  // Like ipykernel's stop_on_error: requests sent behind the failed cell are aborted. They were
  // gathered before its reply went out (finish_cell), so a request the client sends after
  // seeing the error is never caught up in it.
  for (const WireMessage& request : queue_.take_executes()) {
    client_.status("busy", &request);
    // The spec gives every execute_reply an execution_count (ipykernel's aborted ones lack
    // it, and fail its own suite's message checks): the count, which an aborted cell leaves.
    json aborted = create_aborted_reply();
    aborted["execution_count"] = current_.execution_count();
    client_.reply(Channel::shell, request, "execute_reply", std::move(aborted),
                  {{"status", "aborted"}});
    client_.status("idle", &request);
  }
}

void Kernel::interrupt_cell() {
  if (current_.active() && worker_) {
    current_.cell().user_interrupted = true;
    current_.cell().paused.resume(Clock::now());  // the interrupt resumes a paused main thread
    worker_->interrupt();
  }
}

void Kernel::request_shutdown() {
  shutting_down_ = true;
}

}  // namespace belljar
