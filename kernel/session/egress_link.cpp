// The egress proxy's decisions (sandbox/egress/egress_proxy.hpp), made on the proxy's own thread
// and recorded here, on the reactor's: an audit record each up to a rate (audit_throttle.hpp: the
// rest are counted in a per-interval egress_summary), the metrics, and the running cell's
// list of denied hosts (execute_reply metadata belljar.egress_denied) and its requests to hosts
// with bound secrets (belljar.secrets). Connections the proxy answered unread, past its refusal
// budget (sandbox/egress/refusal_budget.hpp), arrive as a count: in the interval's summary, the
// metrics, and one rate-limited diagnostic line.
#include <algorithm>
#include <cmath>

#include "kernel/session/kernel.hpp"
#include "sandbox/os/host_port.hpp"

namespace belljar {

namespace {
constexpr size_t kDeniedPerCell = 100;  // the metadata names at most this many hosts
}  // namespace

// A request to a host with a bound secret: its facts in the egress record (names, never
// values), the metrics, and the running cell's totals.
void Kernel::record_secret_use(const SecretUse& use, json& record) {
  record["secrets"] = use.secrets;
  record["injected"] = use.injected;
  record["status"] = use.status;
  record["latency_ms"] = std::round(use.latency_ms * 10) / 10;
  if (use.input_tokens || use.output_tokens) {
    json tokens = json::object();
    if (use.input_tokens) tokens["input"] = *use.input_tokens;
    if (use.output_tokens) tokens["output"] = *use.output_tokens;
    record["tokens"] = tokens;
  }
  for (const auto& name : use.secrets) metrics_.secret_use(name, use.injected);
  metrics_.model_tokens(use.input_tokens.value_or(0), use.output_tokens.value_or(0));
  if (!executing()) return;
  auto& totals = cell_->secrets;
  ++totals.requests;
  totals.injected += use.injected ? 1 : 0;
  totals.latency_ms += use.latency_ms;
  totals.input_tokens += use.input_tokens.value_or(0);
  totals.output_tokens += use.output_tokens.value_or(0);
}

void Kernel::handle_egress() {
  if (!egress_) return;
  DecisionQueue::Taken taken = egress_->take_decisions();
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
    if (d.secret_use) record_secret_use(*d.secret_use, record);
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
  if (taken.refused_unread > 0) {
    egress_audit_.refused_unread(taken.refused_unread, now);
    metrics_.egress_refused_unread(taken.refused_unread);
    frame_log_.log("egress-refused-unread",
                   "the egress proxy answered " + std::to_string(taken.refused_unread) +
                       " connection(s) unread: the sandbox was refused too many in a short time");
  }
}

}  // namespace belljar
