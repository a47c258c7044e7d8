// The core as its parts ask for it (kernel.hpp's KernelCore): the running request's facts and
// the core's own steps, one line each. Each part sees only its own narrow interface.
#include "kernel/session/kernel.hpp"

namespace belljar {

// DebugCore (debug_link.hpp)

OutputBudget& KernelCore::output_budget() {
  return kernel_.output_budget();
}

const WireMessage* KernelCore::output_parent() const {
  return kernel_.output_parent();
}

const WireMessage* KernelCore::background_parent() const {
  return kernel_.background_parent();
}

std::optional<int> KernelCore::execution_count() const {
  if (!kernel_.executing()) return std::nullopt;
  return kernel_.cell_->execution_count;
}

void KernelCore::note_pause(bool paused, Clock::time_point now) {
  Kernel& k = kernel_;
  k.limits_.note_pause(k.cell_ ? &*k.cell_ : nullptr, k.worker_ ? &*k.worker_ : nullptr, paused,
                       now);
}

void KernelCore::end_pause(Clock::time_point now) {
  if (kernel_.cell_) kernel_.cell_->paused.resume(now);
}

void KernelCore::read_output_before(const json& frame) {
  kernel_.worker_link_.read_output_before(frame);
}

// IdleLink::Core (idle_link.hpp)

const WireMessage* KernelCore::running() const {
  return kernel_.worker_runs_code() ? &kernel_.cell_->request : nullptr;
}

const WireMessage* KernelCore::served() const {
  if (!kernel_.cell_ || !kernel_.cell_->in_worker) return nullptr;
  // The text of a comm handler running during the cell is its message's, as ipykernel's is.
  if (const WireMessage* handler = kernel_.comms_.running(); handler && kernel_.executing())
    return handler;
  return &kernel_.cell_->request;
}

// As the running request's frames are handled (handle_frame).
void KernelCore::take_output(WorkerFrame type, const json& frame) {
  switch (type) {
    case WorkerFrame::display:
    case WorkerFrame::update_display:
      return kernel_.on_output(type, frame);
    case WorkerFrame::clear_output:
      return kernel_.on_clear_output(frame);
    case WorkerFrame::comm_open:
    case WorkerFrame::comm_msg:
    case WorkerFrame::comm_close:
      return kernel_.comms_.publish(std::string(worker_frame_name(type)), frame,
                                    &kernel_.cell_->request, *kernel_.cell_, kernel_.budget_);
    default:  // no other output comes so (request_kind.hpp's idle_output)
      return kernel_.frame_log_.log(
          "worker frame dropped", std::string(worker_frame_name(type)) + " sent between requests");
  }
}

OutputBudget& KernelCore::running_budget() {
  return kernel_.budget_;
}

void KernelCore::show_pipes() {
  kernel_.worker_link_.flush_streams(true);
}

// WorkerLink::Core (worker_link.hpp)

void KernelCore::text_read() {
  // Text read while no request's code runs came between requests: said once a window when
  // any of it was withheld.
  if (!kernel_.worker_runs_code()) kernel_.idle_.tell_withheld();
}

void KernelCore::handle(const json& frame) {
  kernel_.handle_frame(frame);
}

void KernelCore::faulted() {
  kernel_.debug_.close();
  if (kernel_.worker_) kernel_.worker_->kill();
}

}  // namespace belljar
