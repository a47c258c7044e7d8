// The egress proxy's decisions (sandbox/egress/egress_proxy.hpp), made on the proxy's own thread
// and recorded here, on the reactor's: an audit record each up to a rate (audit_throttle.hpp: the
// rest are counted in a per-interval egress_summary), the metrics, and the running cell's
// list of denied hosts (execute_reply metadata belljar.egress_denied).
#include <algorithm>

#include "kernel/session/kernel.hpp"
#include "sandbox/os/host_port.hpp"

namespace belljar {

namespace {
constexpr size_t kDeniedPerCell = 100;  // the metadata names at most this many hosts
}  // namespace

void Kernel::handle_egress() {
  if (!egress_) return;
  EgressProxy::Decisions taken = egress_->take_decisions();
  auto now = Clock::now();
  for (const auto& d : taken.items) {
    auto or_null = [](const std::string& text) {
      return text.empty() ? json(nullptr) : json(text);
    };
    json record = {{"decision", verdict_name(d.decision)},
                   {"host", d.host},
                   {"port", d.port},
                   {"method", d.method},
                   {"rule", or_null(d.rule)},
                   {"reason", or_null(std::string(failure_name(d.reason)))},
                   {"address", or_null(d.address)}};
    if (!d.detail.empty()) record["detail"] = d.detail;
    record["execution_count"] = executing() ? json(cell_->execution_count) : json(nullptr);
    std::string target = host_port(d.host, d.port);
    if (egress_audit_.admit(std::string(verdict_name(d.decision)), target, now))
      audit_.record("egress", record);
    // Failures (no answer, no connection) were allowed by the policy: they count as allowed.
    metrics_.egress(d.decision != EgressVerdict::denied);
    if (executing() && d.decision == EgressVerdict::denied && !d.host.empty()) {
      auto& denied = cell_->egress_denied;
      if (denied.size() < kDeniedPerCell &&
          std::find(denied.begin(), denied.end(), target) == denied.end())
        denied.push_back(target);
    }
  }
  egress_audit_.dropped(taken.dropped, now);  // in the interval's summary, as not_queued
}

}  // namespace belljar
