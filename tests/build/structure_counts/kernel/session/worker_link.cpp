// A fixture of tests/build/structure_counts_selftest.py (read as text, never compiled): a link,
// a class of its own that reaches the Kernel only through the interface it is given.
#include "kernel/session/worker_link.hpp"

namespace belljar {

void WorkerLink::start() {
  core_.publish("status");
}

namespace {
// A Kernel named inside another scope is not the Kernel: its methods may live anywhere.
struct KernelProbe {
  void poke();
};
void KernelProbe::poke() {}
}  // namespace

// structure_counts_selftest: a Kernel method here

}  // namespace belljar
