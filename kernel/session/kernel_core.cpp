// The core as its parts ask for it (kernel.hpp's KernelCore): the running request's facts and
// the core's own steps, one line each. Each part sees only its own narrow interface.
#include "kernel/session/kernel.hpp"

namespace belljar {

// DebugCore (debug_link.hpp)

// What the worker's output is charged to now: the running cell's or comm handler's budget, once
// the worker has it, else the budget of output between requests (idle_output.hpp).
OutputBudget& KernelCore::output_budget() {
  if (kernel_.current_.worker_runs_code()) return kernel_.current_.budget();
  return kernel_.idle_.budget(Clock::now());
}

const WireMessage* KernelCore::output_parent() const {
  return kernel_.current_.output_parent();
}

const WireMessage* KernelCore::background_parent() const {
  return kernel_.background_parent();
}

std::optional<int> KernelCore::execution_count() const {
  if (!kernel_.current_.executing()) return std::nullopt;
  return kernel_.current_.cell().execution_count;
}

void KernelCore::note_pause(bool paused, Clock::time_point now) {
  Kernel& k = kernel_;
  k.limits_.note_pause(k.current_.get(), k.worker_ ? &*k.worker_ : nullptr, paused, now);
}

void KernelCore::end_pause(Clock::time_point now) {
  if (Cell* cell = kernel_.current_.get()) cell->paused.resume(now);
}

void KernelCore::read_output_before(const json& frame) {
  kernel_.worker_link_.read_output_before(frame);
}

// IdleLink::Core (idle_link.hpp)

const WireMessage* KernelCore::running() const {
  return kernel_.current_.worker_runs_code() ? &kernel_.current_.cell().request : nullptr;
}

const WireMessage* KernelCore::served() const {
  const CurrentRequest& current = kernel_.current_;
  if (!current.active() || !current.cell().in_worker) return nullptr;
  // The text of a comm handler running during the cell is its message's, as ipykernel's is.
  if (const WireMessage* handler = kernel_.comms_.running(); handler && current.executing())
    return handler;
  return &current.cell().request;
}

// As the running request's frames are handled (handle_frame).
void KernelCore::take_output(WorkerFrame type, const json& frame) {
  switch (type) {
    case WorkerFrame::display:
    case WorkerFrame::update_display:
      return cell_output().on_output(type, frame, kernel_.current_);
    case WorkerFrame::clear_output:
      return cell_output().on_clear_output(frame, kernel_.current_);
    case WorkerFrame::comm_open:
    case WorkerFrame::comm_msg:
    case WorkerFrame::comm_close:
      return kernel_.comms_.publish(std::string(worker_frame_name(type)), frame,
                                    &kernel_.current_.cell().request, kernel_.current_.cell(),
                                    kernel_.current_.budget());
    default:  // no other output comes so (request_kind.hpp's idle_output)
      return kernel_.obs_.frame_log.log(
          "worker frame dropped", std::string(worker_frame_name(type)) + " sent between requests");
  }
}

OutputBudget& KernelCore::running_budget() {
  return kernel_.current_.budget();
}

void KernelCore::show_pipes() {
  kernel_.worker_link_.flush_streams(true);
}

// WorkerLink::Core (worker_link.hpp)

void KernelCore::text_read() {
  // Text read while no request's code runs came between requests: said once a window when
  // any of it was withheld.
  if (!kernel_.current_.worker_runs_code()) kernel_.idle_.tell_withheld();
}

void KernelCore::handle(const json& frame) {
  kernel_.handle_frame(frame);
}

void KernelCore::faulted() {
  kernel_.debug_.close();
  if (kernel_.worker_) kernel_.worker_->kill();
}

// CellOutput::Prompt (cell_output.hpp)

void KernelCore::request_input(const WireMessage& request, json content) {
  kernel_.client_.frontend()->request_input(request, std::move(content));
}

CellOutput KernelCore::cell_output() {
  Kernel& k = kernel_;
  return {
      k.client_,    k.worker_link_, k.checks_, k.obs_.frame_log, k.checks_.redactor(), k.records_,
      k.obs_.audit, k.limits_,      *this};
}

}  // namespace belljar
