// The Kernel's core, the worker's side: its start, each of its frames handed to the part it is
// for (the running request's output: cell_output.hpp), its exits and restarts. The channel
// itself (frames, pipes, faults) is the worker link's (worker_link.hpp). Everything read here
// comes from untrusted code and is checked before it reaches a client.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "kernel/output/active_output.hpp"
#include "kernel/output/bundle_check.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/buffer_room.hpp"
#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/protocol/signer.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/frame_reader.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

void Kernel::start_worker() {
  worker_ready_ = false;
  workspace_.new_warden();
  debug_.new_worker();
  debug_.readiness(worker_ready_, start_error_);
  checks_.widgets().forget_all();  // the page's comms were the old worker's
  try {
    worker_.emplace(WorkerProcess::start(options_.policy, options_.launch));
  } catch (const SandboxError& e) {
    worker_.reset();
    if (restarts_ == 0 && failed_starts_ == 0) throw;  // at launch: refuse to start
    start_error_ = std::string("the sandbox could not be started: ") + e.what();
    debug_.readiness(worker_ready_, start_error_);
    schedule_restart(start_error_);
    dispatch_next();  // fails queued cells with the reason
    for (auto& held : debug_.take_held()) submit_control(held);  // refused with the reason
    return;
  }
  ::fcntl(worker_->debug_fd(), F_SETFL, ::fcntl(worker_->debug_fd(), F_GETFL) | O_NONBLOCK);
  debug_.attach(worker_->debug_fd());
  worker_link_.attach(worker_->frames_fd(), worker_->stdout_fd(), worker_->stderr_fd());
  // This sandbox's connections to 127.0.0.1:3128 arrive on its channel.
  if (egress_.running()) egress_.attach(worker_->take_egress_channel());
  sandbox_notes_ = worker_->notes();
  audit_.record("worker_start", {{"pid", worker_->pid()},
                                 {"isolation", isolation_name(options_.policy.isolation)},
                                 {"restart", restarts_}});
}

void Kernel::handle_frame(const json& frame) {
  const std::string& name = frame["type"].get_ref<const std::string&>();  // checked by next()
  std::optional<WorkerFrame> type = worker_frame(name);
  if (!type) return frame_log_.log("worker sent an unknown frame type", name.substr(0, 64));
  if (*type == WorkerFrame::hello) return on_hello(frame);
  if (*type == WorkerFrame::comm_begin) return comms_.on_begin(frame, current_.executing());
  if (debug_channel_frame(*type))
    return frame_log_.log("worker frame dropped",
                          name + " on fd 3: it belongs on the debug channel");
  // Output that names its request (a task's, a thread's): shown under it, whenever it comes.
  if (frame.contains("parent") && names_a_parent(*type))
    return idle_.on_parented_output(*type, frame);
  if (json_field(frame, "idle", false)) return idle_.on_idle_frame(*type, frame);
  if (!current_.answers(frame)) {
    // The handler of a comm message handed during the cell, once the worker said it began.
    if (current_.executing() && comms_.handler_runs(json_field(frame, "id", "")))
      return comms_.on_handler_frame(*type, frame, current_.cell(), current_.budget(),
                                     current_.frame_ids());
    // Frames carry the id of the request they answer: a stale one (a delayed `done` after a
    // forged one, a thread's display after its cell ended) never lands in a later request.
    return frame_log_.log("worker frame dropped",
                          name + " for a request that is not the current one");
  }
  switch (*type) {
    case WorkerFrame::hello:
    case WorkerFrame::comm_begin:
    case WorkerFrame::debug_reply:
    case WorkerFrame::debug_event:
    case WorkerFrame::debug_state:
      return;  // above
    case WorkerFrame::display:
    case WorkerFrame::update_display:
    case WorkerFrame::result:
      return core_.cell_output().on_output(*type, frame, current_);
    case WorkerFrame::clear_output:
      return core_.cell_output().on_clear_output(frame, current_);
    case WorkerFrame::stream:  // only ever sent naming a parent (on_parented_output)
      return frame_log_.log("worker frame dropped", "a stream frame that names no request");
    case WorkerFrame::error:
      return core_.cell_output().on_error(frame, current_);
    case WorkerFrame::input_request:
      return core_.cell_output().on_input_request(frame, current_);
    case WorkerFrame::limits:
      if (current_.executing())
        return worker_link_.send(limits_.ask(current_.cell(), &*worker_, frame, current_.budget()));
      if (current_.running_code())
        worker_link_.send(
            {{"type", "limits_reply"}, {"ok", false}, {"error", "%%limits applies to cells"}});
      return;
    case WorkerFrame::audit_request:
      return core_.cell_output().on_audit_request(frame, current_);
    case WorkerFrame::comm_open:
    case WorkerFrame::comm_msg:
    case WorkerFrame::comm_close:
      if (current_.running_code())
        comms_.publish(name, frame, &current_.cell().request, current_.cell(), current_.budget());
      return;
    case WorkerFrame::done:
      return on_done(frame);
    case WorkerFrame::complete_reply:
    case WorkerFrame::inspect_reply:
    case WorkerFrame::is_complete_reply:
    case WorkerFrame::comm_info_reply:
      if (worker_answer(current_.cell().kind) == *type) finish_request_reply(frame);
      return;
  }
}

void Kernel::on_hello(const json& frame) {
  if (worker_ready_) return frame_log_.log("worker frame dropped", "a second hello");
  // Built by the supervisor: the frontend loads codemirror_mode as a script path.
  auto info = frame.find("language_info");
  language_info_ = language_info_from_worker(info != frame.end() ? *info : json::object());
  // Whether the sandbox's Python can debug (debugpy found): without it nothing is ever written
  // to fd 4, and every debug_request is answered by the supervisor.
  debug_.hello(json_field(frame, "debugger", false));
  worker_ready_ = true;
  limits_.worker_ready(worker_->cpu_seconds());
  start_error_.clear();
  debug_.readiness(worker_ready_, start_error_);
  failed_starts_ = 0;
  dispatch_next();
  for (auto& held : debug_.take_held()) submit_control(held);
}

void Kernel::on_done(const json& frame) {
  // The proxy's decisions for this cell's requests were posted before their responses ended,
  // so before this done was written; but read_frames may have read it past the poll that saw
  // them. Take them now, or the cell's record and reply would miss its last requests.
  handle_egress();
  // One or the other: finish_cell starts the next request, which this done is not for.
  if (current_.executing())
    finish_cell(frame);
  else if (current_.cell().kind == RequestKind::comm)
    finish_request_reply(frame);  // a comm handler's done
}

void Kernel::on_worker_exit(const WorkerExit& exit) {
  worker_link_.drain_pipes();
  worker_link_.flush_streams(true);
  std::string cause = exit.describe();
  audit_.record(
      "worker_exit",
      {{"cause", cause}, {"memory_limit", exit.memory_limit}, {"during_cell", current_.active()}});
  bool was_ready = worker_ready_;
  queue_.push_shell_first(comms_.take_back());  // before a fresh worker could be given them twice
  debug_.end_session("the session restarted");
  worker_.reset();
  worker_link_.detach();
  debug_.worker_gone();
  worker_ready_ = false;
  debug_.readiness(worker_ready_, start_error_);
  ++restarts_;
  metrics_.restart();
  if (shutting_down_) return;
  if (was_ready) {
    failed_starts_ = 0;
    start_worker();
  } else {
    start_error_ = "the Python worker exited before it was ready (" + cause + ")";
    debug_.readiness(worker_ready_, start_error_);
    schedule_restart(start_error_);
    dispatch_next();  // fails queued cells with the reason
    for (auto& held : debug_.take_held()) submit_control(held);
  }
  if (current_.active()) {
    CellLimits::Failure failure = limits_.after_exit(current_.cell(), exit, cause);
    fail_cell(failure.ename, failure.evalue, failure.status);
  }
}

void Kernel::restart_worker(const std::string& why) {
  // Output already in the pipes belongs to the old session: deliver it before it goes.
  worker_link_.drain_pipes();
  worker_link_.flush_streams(true);
  audit_.record("worker_restart", {{"reason", why}, {"during_cell", current_.active()}});
  drop_worker();
  queue_.push_shell_first(comms_.take_back());
  debug_.end_session("the session restarted");
  worker_ready_ = false;
  debug_.readiness(worker_ready_, start_error_);
  restart_at_.reset();
  ++restarts_;  // a start failure from here on is retried, not a refusal to start
  metrics_.restart();
  if (current_.active())
    fail_cell("WorkerDied",
              "the session was reset (" + why +
                  "): variables were lost, "
                  "workspace files were kept",
              CellStatus::crashed);
  if (shutting_down_) return;
  failed_starts_ = 0;
  start_worker();
}

void Kernel::schedule_restart(const std::string& why) {
  // Back off when the worker keeps dying at once, so a broken interpreter can't spin us.
  ++failed_starts_;
  auto delay = std::chrono::milliseconds(std::min(5000, 50 << std::min(failed_starts_, 7)));
  log_line("worker restart in " + std::to_string(delay.count()) + " ms: " + why);
  restart_at_ = Clock::now() + delay;
}

void Kernel::drop_worker() {
  if (!worker_) return;
  worker_->kill();
  worker_.reset();
  worker_link_.detach();
  debug_.worker_gone();
}

}  // namespace belljar
