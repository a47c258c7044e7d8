// A fixture of tests/build/structure_counts_selftest.py (read as text, never compiled): the
// Kernel's core, one of the files that may define its methods.
#include "kernel/session/kernel.hpp"

namespace belljar {

Kernel::Kernel(KernelOptions options) : session_id_{options.id}, restarts_{0} {}

Kernel::~Kernel() = default;

void Kernel::poll_once() {
  handle_signals();
}

}  // namespace belljar
