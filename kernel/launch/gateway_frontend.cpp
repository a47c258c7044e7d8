#include "kernel/launch/gateway_frontend.hpp"

#include "kernel/observability/diagnostics.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

void GatewayFrontend::serving() {
  send_to_response_address(gateway_, sealed_);
  sealed_.clear();
  log_line("connection info sent to the gateway at " + gateway_.text());
}

void GatewayFrontend::add_poll_items(std::vector<zmq::pollitem_t>& items) {
  size_t before = items.size();
  jupyter_.add_poll_items(items);
  jupyter_items_ = items.size() - before;
  comm_.add_poll_items(items);
}

void GatewayFrontend::handle(const zmq::pollitem_t* items, Kernel& kernel) {
  jupyter_.handle(items, kernel);
  for (GatewayAction action : comm_.handle(items + jupyter_items_)) {
    switch (action) {
      case GatewayAction::interrupt:
        kernel.interrupt_cell();
        break;
      case GatewayAction::shutdown:
        log_line("the gateway asked for shutdown (comm port)");
        kernel.request_shutdown();
        break;
      case GatewayAction::none:
        break;
    }
  }
}

std::optional<std::chrono::steady_clock::time_point> GatewayFrontend::next_wakeup() const {
  auto jupyter = jupyter_.next_wakeup();
  auto comm = comm_.next_deadline();
  if (jupyter && comm) return std::min(*jupyter, *comm);
  return jupyter ? jupyter : comm;
}

}  // namespace belljar
