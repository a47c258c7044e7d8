// The Kernel's core, the worker's side: its start, each of its frames handed to the part it is
// for (the running request's output: cell_output.hpp), its exits and restarts. The channel
// itself (frames, pipes, faults) is the worker link's (worker_link.hpp); what follows a start or
// an exit (at once, after a back-off, a refusal to start) is the worker's life's
// (worker_life.hpp). Everything read here comes from untrusted code and is checked before it
// reaches a client.
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
  life_.starting();
  workspace_.new_warden();
  debug_.new_worker();
  debug_.readiness(life_.ready(), life_.start_error());
  checks_.widgets().forget_all();       // the page's comms were the old worker's
  current_.checkpoints().forget_all();  // and its checkpoints, the old worker's forks
  try {
    worker_.emplace(WorkerProcess::start(options_.policy, options_.launch));
  } catch (const SandboxError& e) {
    worker_.reset();
    // At launch: refuse to start. Later: retried after a back-off (worker_life.hpp).
    if (!life_.start_failed(std::string("the sandbox could not be started: ") + e.what(),
                            Clock::now()))
      throw;
    debug_.readiness(life_.ready(), life_.start_error());
    dispatch_next();  // fails queued cells with the reason
    for (auto& held : debug_.take_held()) submit_control(held);  // refused with the reason
    return;
  }
  ::fcntl(worker_->debug_fd(), F_SETFL, ::fcntl(worker_->debug_fd(), F_GETFL) | O_NONBLOCK);
  debug_.attach(worker_->debug_fd());
  worker_link_.attach(worker_->frames_fd(), worker_->stdout_fd(), worker_->stderr_fd());
  // This sandbox's connections to 127.0.0.1:3128 arrive on its channel.
  if (egress_.running()) egress_.attach(worker_->take_egress_channel());
  life_.started(worker_->notes());
  obs_.audit.record("worker_start", {{"pid", worker_->pid()},
                                     {"isolation", isolation_name(options_.policy.isolation)},
                                     {"restart", life_.restarts()}});
}

void Kernel::handle_frame(const json& frame) {
  const std::string& name = frame["type"].get_ref<const std::string&>();  // checked by next()
  std::optional<WorkerFrame> type = worker_frame(name);
  if (!type) return obs_.frame_log.log("worker sent an unknown frame type", name.substr(0, 64));
  if (*type == WorkerFrame::hello) return on_hello(frame);
  if (*type == WorkerFrame::comm_begin) return comms_.on_begin(frame, current_.executing());
  if (debug_channel_frame(*type))
    return obs_.frame_log.log("worker frame dropped",
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
    return obs_.frame_log.log("worker frame dropped",
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
      return obs_.frame_log.log("worker frame dropped", "a stream frame that names no request");
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
    case WorkerFrame::checkpoint_request:
      return on_checkpoint_request(frame);
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

void Kernel::on_checkpoint_request(const json& frame) {
  Checkpoints::Facts facts;
  facts.in_cell = current_.executing();
  facts.execution_count = current_.execution_count();
  // A sandbox's --memory is the total of its processes (its cgroup, or the warden's sum without
  // one), a checkpoint's copied pages included; --isolation none has only RLIMIT_AS, per process.
  if (options_.policy.memory_bytes > 0 && options_.policy.isolation == Isolation::none)
    facts.refusal =
        "with --isolation none nothing sums the session's memory, so a checkpoint's pages "
        "would escape --memory: checkpoints are refused";
  else if (debug_.session_started())
    facts.refusal = "a debug session is started: stop debugging before a checkpoint or rollback";
  worker_link_.send(current_.checkpoints().ask(frame, facts));
}

void Kernel::on_hello(const json& frame) {
  // Its language_info is built by the supervisor (worker_life.hpp).
  if (!life_.hello(frame)) return obs_.frame_log.log("worker frame dropped", "a second hello");
  // Whether the sandbox's Python can debug (debugpy found): without it nothing is ever written
  // to fd 4, and every debug_request is answered by the supervisor.
  debug_.hello(json_field(frame, "debugger", false));
  limits_.worker_ready(worker_->cpu_seconds());
  debug_.readiness(life_.ready(), life_.start_error());
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
  obs_.audit.record(
      "worker_exit",
      {{"cause", cause}, {"memory_limit", exit.memory_limit}, {"during_cell", current_.active()}});
  queue_.push_shell_first(comms_.take_back());  // before a fresh worker could be given them twice
  debug_.end_session("the session restarted");
  worker_.reset();
  worker_link_.detach();
  debug_.worker_gone();
  WorkerLife::AfterExit next = life_.exited(cause, shutting_down_, Clock::now());
  debug_.readiness(life_.ready(), life_.start_error());
  obs_.metrics.restart();
  if (next == WorkerLife::AfterExit::none) return;
  if (next == WorkerLife::AfterExit::start_now) {
    start_worker();
  } else {            // after a back-off, with the reason for the requests that cannot wait
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
  obs_.audit.record("worker_restart", {{"reason", why}, {"during_cell", current_.active()}});
  drop_worker();
  queue_.push_shell_first(comms_.take_back());
  debug_.end_session("the session restarted");
  life_.reset();  // a start failure from here on is retried, not a refusal to start
  debug_.readiness(life_.ready(), life_.start_error());
  obs_.metrics.restart();
  if (current_.active())
    fail_cell("WorkerDied",
              "the session was reset (" + why +
                  "): variables were lost, "
                  "workspace files were kept",
              CellStatus::crashed);
  if (shutting_down_) return;
  start_worker();
}

void Kernel::drop_worker() {
  if (!worker_) return;
  worker_->kill();
  worker_.reset();
  worker_link_.detach();
  debug_.worker_gone();
}

}  // namespace belljar
