#pragma once
// The egress link: the egress proxy (sandbox/egress_api/egress_service.hpp: its own thread, its
// module loaded only when the policy allows a host) as the Kernel sees it. Its decisions, made on
// the proxy's thread, are recorded here on the reactor's: an audit record each up to a rate
// (audit_throttle.hpp: the rest are counted in a per-interval egress_summary), the metrics, and
// the running cell's share (CellEgress: the hosts denied, for execute_reply metadata
// belljar.egress_denied, and its requests to hosts with bound secrets, belljar.secrets).
// Connections the proxy answered unread, past its refusal budget (sandbox/egress/
// refusal_budget.hpp), arrive as a count: in the interval's summary, the metrics, and one
// rate-limited diagnostic line. The proxy's thread works for the sandbox alone, so all of its
// CPU is the session's (take_cpu: the outside attack on round three relayed uploads on it).
// Doors: the audit log, the metrics, the diagnostics log; of the cell, only its CellEgress.
#include <chrono>
#include <memory>
#include <optional>

#include "kernel/observability/audit_log.hpp"
#include "kernel/observability/audit_throttle.hpp"
#include "kernel/observability/diagnostics.hpp"
#include "kernel/observability/metrics.hpp"
#include "kernel/session/cell.hpp"
#include "sandbox/egress_api/egress_service.hpp"

namespace belljar {

class EgressLink {
 public:
  using Clock = std::chrono::steady_clock;

  EgressLink(AuditRecords& audit, Metrics& metrics, RateLimitedLog& log)
      : audit_(audit), metrics_(metrics), log_(log) {}

  // The proxy, once started (egress_module.hpp); none when the policy allows no host.
  void serve_with(std::unique_ptr<EgressService> service) { service_ = std::move(service); }
  bool running() const { return service_ != nullptr; }
  // The trust bundle the sandbox gets ("" when no secret is bound).
  std::string ca_bundle_pem() const { return service_ ? service_->ca_bundle_pem() : ""; }
  // Polled by the reactor: readable while decisions wait; -1 with no proxy.
  int decisions_fd() const { return service_ ? service_->decisions_fd() : -1; }
  // A new sandbox's connections to 127.0.0.1:3128 arrive on its channel.
  void attach(Fd channel);

  // The decisions posted since the last take: recorded, and the running cell's share added to
  // `cell` (null when no cell executes), whose count each record names.
  void take_decisions(Clock::time_point now, CellEgress* cell, std::optional<int> execution_count);
  // The proxy thread's CPU since the last call: to be charged to the session.
  double take_cpu();
  // The interval's egress_summary record, when one is due (`final`: now, at shutdown).
  void record_summary(Clock::time_point now, bool final);
  std::optional<Clock::time_point> summary_due() const { return throttle_.due(); }

 private:
  void record_secret_use(const SecretUse& use, nlohmann::json& record, CellEgress* cell);

  AuditRecords& audit_;
  Metrics& metrics_;
  RateLimitedLog& log_;
  std::unique_ptr<EgressService> service_;
  EgressAuditThrottle throttle_;  // egress records: the first ones in full, then counted
  double cpu_charged_ = 0;        // the proxy thread's CPU already handed to the session
};

}  // namespace belljar
