// The running request as the debugger link asks for it (debug_link.hpp's DebugCore): the core's
// answers, one line each, until the parts they come from own them.
#include "kernel/session/kernel.hpp"

namespace belljar {

OutputBudget& KernelDebugCore::output_budget() {
  return kernel_.output_budget();
}

const WireMessage* KernelDebugCore::output_parent() const {
  return kernel_.output_parent();
}

const WireMessage* KernelDebugCore::background_parent() const {
  return kernel_.background_parent();
}

std::optional<int> KernelDebugCore::execution_count() const {
  if (!kernel_.executing()) return std::nullopt;
  return kernel_.cell_->execution_count;
}

void KernelDebugCore::note_pause(bool paused, Clock::time_point now) {
  Kernel& k = kernel_;
  k.limits_.note_pause(k.cell_ ? &*k.cell_ : nullptr, k.worker_ ? &*k.worker_ : nullptr, paused,
                       now);
}

void KernelDebugCore::end_pause(Clock::time_point now) {
  if (kernel_.cell_) kernel_.cell_->paused.resume(now);
}

void KernelDebugCore::read_output_before(const json& frame) {
  kernel_.read_output_before(frame);
}

}  // namespace belljar
