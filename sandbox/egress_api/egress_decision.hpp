#pragma once
// The egress proxy's decisions: one per request, made on the proxy's thread and handed to the
// supervisor's reactor (kernel/session/egress_link.cpp), which writes the audit log and the
// metrics from them. The queue between the two is bounded: a sandbox that opens connections
// in a loop can make the proxy drop decisions (it counts them), never grow without bound.
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/os/fd.hpp"

namespace belljar {

// What became of a request: the policy let it through, the policy said no, or it was allowed
// but could not be done (the metrics count failures as allowed).
enum class EgressVerdict { allowed, denied, failed };

// Why a request did not go through; each reason belongs to one verdict (verdict_of).
enum class EgressFailure {
  none,                   // allowed
  not_allowlisted,        // denied: the host is on no --allow-net rule
  port_not_allowed,       // denied: the host is, that port is not
  private_address,        // denied: the name resolves inside and the rule is not local
  bad_request,            // denied: a malformed, oversized or unframed request
  sni_mismatch,           // denied: the tunnel's ClientHello names another host
  sni_missing,            // denied: no usable ClientHello, or one without a name
  resolve_failed,         // failed: the name does not resolve
  connect_failed,         // failed: no address accepted the connection
  timeout,                // failed: resolving or connecting took too long
  too_many_connections,   // failed: the proxy is at its limit
  secret_needs_tls,       // denied: plain HTTP to a host with a bound secret (--secret)
  secret_unsupported,     // denied: a request the secret broker does not forward (HTTP/1.0,
                          //   Upgrade, a malformed or oversized head)
  upstream_certificate,   // failed: a bound host's TLS handshake or certificate did not verify
  upstream_response,      // failed: a bound host's response could not be read (malformed)
  compressed_response,    // failed: a bound host's body was compressed, where a value could hide
  refusals_rate_limited,  // denied: too many refusals from the session; answered unread
};

// The names on the wire (X-Belljar-Denied / X-Belljar-Error) and in the audit log.
std::string_view verdict_name(EgressVerdict verdict);
std::string_view failure_name(EgressFailure failure);  // "not-allowlisted", ...; "" for none
EgressVerdict verdict_of(EgressFailure failure);

// A verdict or a reason reads as its name: `decision == "denied"`.
inline bool operator==(EgressVerdict verdict, std::string_view name) {
  return verdict_name(verdict) == name;
}
inline bool operator==(EgressFailure failure, std::string_view name) {
  return failure_name(failure) == name;
}

// A request on a connection the proxy brokers for a bound secret (brokered_http.hpp): one per
// request, with the names (never the values) of the secrets bound to the host.
struct SecretUse {
  std::vector<std::string> secrets;
  bool injected = false;  // a placeholder in the request was replaced by its value
  int status = 0;         // the upstream's final status; 0 when none came
  double latency_ms = 0;  // from the request's head sent to its response's end
  std::optional<uint64_t> input_tokens, output_tokens;  // a model API's usage, when reported
};

struct EgressDecision {
  std::string method;  // CONNECT, GET, ... ("" when no request could be read)
  std::string host;    // as requested, normalised when it could be
  uint16_t port = 0;
  EgressVerdict decision = EgressVerdict::allowed;
  std::string rule;  // the rule that allowed the host: "--allow-net example.com"; "" for none
  EgressFailure reason = EgressFailure::none;
  std::string detail;   // one sentence for humans (the 403/502 body)
  std::string address;  // the address connected to, or refused
  std::optional<SecretUse> secret_use = std::nullopt;
};

// Thread-safe: the proxy's thread posts, the reactor's takes.
class DecisionQueue {
 public:
  explicit DecisionQueue(size_t max_queued);
  void post(EgressDecision decision);
  // Readable (an eventfd) while decisions are waiting.
  int fd() const { return event_.get(); }
  struct Taken {
    std::vector<EgressDecision> items;
    uint64_t dropped = 0;         // decisions that found the queue full since the last take
    uint64_t refused_unread = 0;  // connections answered unread since the last take
  };
  Taken take();
  // A connection answered unread (refusal_budget.hpp): counted, never queued one by one. The
  // kernel is woken for the count at most every kUnreadWake (flush_unread, from the proxy's
  // loop), so a flood costs it a few wakeups a second, not one per connection.
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kUnreadWake{100};
  void count_unread();
  void flush_unread(Clock::time_point now);
  // Until flush_unread has something to do; -1 when nothing waits.
  int unread_flush_ms(Clock::time_point now);

 private:
  std::mutex mutex_;
  std::deque<EgressDecision> queued_;
  uint64_t dropped_ = 0;
  uint64_t refused_unread_ = 0;
  bool unread_woken_ = false;  // a wake for the count is out, not yet taken
  Clock::time_point next_unread_wake_{};
  size_t max_queued_;
  Fd event_;
};

}  // namespace belljar
