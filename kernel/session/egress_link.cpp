#include "kernel/session/egress_link.hpp"

#include <algorithm>
#include <cmath>

#include "sandbox/os/host_port.hpp"

namespace belljar {

using json = nlohmann::json;

void EgressLink::attach(Fd channel) {
  if (service_ && channel) service_->attach(std::move(channel));
}

// A request to a host with a bound secret: its facts in the egress record (names, never
// values), the metrics, and the running cell's totals.
void EgressLink::record_secret_use(const SecretUse& use, json& record, CellEgress* cell) {
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
  if (!cell) return;
  auto& totals = cell->secrets;
  ++totals.requests;
  totals.injected += use.injected ? 1 : 0;
  totals.latency_ms += use.latency_ms;
  totals.input_tokens += use.input_tokens.value_or(0);
  totals.output_tokens += use.output_tokens.value_or(0);
}

void EgressLink::take_decisions(Clock::time_point now, CellEgress* cell,
                                std::optional<int> execution_count) {
  if (!service_) return;
  DecisionQueue::Taken taken = service_->take_decisions();
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
    record["execution_count"] = execution_count ? json(*execution_count) : json(nullptr);
    if (d.secret_use) record_secret_use(*d.secret_use, record, cell);
    std::string target = host_port(d.host, d.port);
    if (throttle_.admit(std::string(verdict_name(d.decision)), target, now))
      audit_.record("egress", record);
    // Failures (no answer, no connection) were allowed by the policy: they count as allowed.
    metrics_.egress(d.decision != EgressVerdict::denied);
    if (cell && d.decision == EgressVerdict::denied && !d.host.empty()) {
      auto& denied = cell->denied;
      if (denied.size() < CellEgress::kDeniedPerCell &&
          std::find(denied.begin(), denied.end(), target) == denied.end())
        denied.push_back(target);
    }
  }
  throttle_.dropped(taken.dropped, now);  // in the interval's summary, as not_queued
  if (taken.refused_unread > 0) {
    throttle_.refused_unread(taken.refused_unread, now);
    metrics_.egress_refused_unread(taken.refused_unread);
    log_.log("egress-refused-unread",
             "the egress proxy answered " + std::to_string(taken.refused_unread) +
                 " connection(s) unread: the sandbox was refused too many in a short time");
  }
}

double EgressLink::take_cpu() {
  if (!service_) return 0;
  double spent = service_->cpu_seconds();
  double uncharged = spent - cpu_charged_;
  cpu_charged_ = spent;
  return uncharged;
}

void EgressLink::record_summary(Clock::time_point now, bool final) {
  if (auto summary = throttle_.take_summary(now, final)) audit_.record("egress_summary", *summary);
}

}  // namespace belljar
