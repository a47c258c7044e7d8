#pragma once
// One proxied connection's state machine, from the request head to its end, and the table of
// the connections the proxy holds (it runs on the proxy's thread, egress_proxy.hpp).
//
// A connection reads the client's request head; asks the allowlist (allowlist.hpp); resolves
// the name (egress_resolver.hpp) and refuses addresses that land inside (address_policy.hpp);
// connects, trying the addresses in turn; for a tunnel to a name, holds the client's first
// bytes until they make a TLS ClientHello naming that host (tls_client_hello.hpp); then relays
// (egress_relay.hpp). A refusal or failure is the proxy's own answer (403, 502, ... or a TLS
// alert), delivered before the connection closes; refusals draw on a budget, past which a new
// connection gets a fixed 403 unread (refusal_budget.hpp). The threat is the sandbox as client:
// every phase has a deadline, what goes upstream is what the allowlist judged (the request line's
// host, one declared body), and every outcome is posted as a decision (egress_decision.hpp).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sandbox/egress/brokered_tunnel.hpp"
#include "sandbox/egress/egress_relay.hpp"
#include "sandbox/egress/egress_resolver.hpp"
#include "sandbox/egress/http_head.hpp"
#include "sandbox/egress/refusal_budget.hpp"
#include "sandbox/egress_api/allowlist.hpp"
#include "sandbox/egress_api/egress_decision.hpp"
#include "sandbox/egress_api/egress_limits.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

using EgressClock = std::chrono::steady_clock;

// epoll's user data in the proxy's loop: an id and which of its descriptors woke us.
enum EgressSide : uint64_t { kWake = 0, kChannel = 1, kClient = 2, kUpstream = 3 };
inline uint64_t epoll_tag(uint64_t id, EgressSide side) {
  return (id << 2) | side;
}

enum class Phase {
  head,        // reading the request head
  resolving,   // waiting for the resolver
  connecting,  // a non-blocking connect() in flight
  hello,       // a tunnel to a name: reading the client's ClientHello, nothing forwarded yet
  relaying,    // bytes both ways
  brokering,   // a tunnel to a host with a bound secret: TLS terminated (brokered_tunnel.hpp)
  answering,   // delivering the proxy's own response, then lingering
  lingering,   // response sent: reading what the client still sends until it closes
};

struct Connection {
  uint64_t id = 0;
  Fd client, upstream;
  // Edge-triggered epoll: what each side was last seen able to do, until EAGAIN says otherwise.
  bool client_in = false, client_out = false, upstream_in = false, upstream_out = false;
  bool client_eof = false, upstream_eof = false, upstream_shut = false, client_shut = false;
  Phase phase = Phase::head;
  Direction up, down;  // client -> upstream, upstream -> client
  EgressClock::time_point deadline;
  RequestHead request;
  RequestHost host;
  const HostRule* rule = nullptr;
  std::vector<IpAddress> addresses;
  size_t next_address = 0;
  std::string last_error;
  // Plain HTTP: the response head is rewritten (Connection: close) before the client sees it.
  // Bytes before `head_from` (interim 1xx heads) may already go to the client.
  bool response_head_pending = false;
  size_t head_from = 0;
  size_t discarded = 0;
  uint64_t body_left = 0;  // plain HTTP: request body bytes still to forward (Content-Length)
  std::unique_ptr<BrokeredTunnel> brokered;

  Endpoint client_end() { return {client.get(), client_in, client_out, client_eof}; }
  Endpoint upstream_end() { return {upstream.get(), upstream_in, upstream_out, upstream_eof}; }
};

// Hosts with bound secrets (--secret): a tunnel to one is terminated and brokered. Empty: every
// tunnel stays end-to-end.
struct SecretBroker {
  std::shared_ptr<const BoundSecrets> secrets;
  std::shared_ptr<SessionCa> ca;  // once handed to the proxy, used on its thread only
  std::string upstream_ca_pem;    // --upstream-ca, beside the host's store (UpstreamTls)
  bool active() const { return secrets && !secrets->empty() && ca; }
};

class Connections {
 public:
  // Sockets are registered with `epoll` under epoll_tag(id, kClient / kUpstream).
  Connections(const std::vector<HostRule>& rules, const EgressLimits& limits, int epoll,
              ResolverPool& resolver, DecisionQueue& decisions, const SecretBroker& broker);
  Connections(const Connections&) = delete;
  Connections& operator=(const Connections&) = delete;

  // A socket the sandbox's init accepted: checked, then served (or answered 503).
  void adopt(Fd client);
  void on_event(uint64_t id, EgressSide side, uint32_t events);
  void on_resolved(uint64_t id, Resolution result);
  // Relays cut short for fairness go on.
  void resume();
  bool resumable() const { return !again_.empty(); }
  void expire(EgressClock::time_point now);
  // Until the next deadline, for epoll_wait(); -1 with no connection.
  int next_timeout_ms() const;
  // Thread-safe.
  size_t open() const { return open_count_.load(); }

 private:
  void read_head(Connection& c);
  void start_request(Connection& c, size_t head_length);
  void resolved(Connection& c, Resolution result);
  void connect_next(Connection& c);
  void finish_connect(Connection& c);
  void connected(Connection& c);
  bool check_plain_request(Connection& c);
  int discard_from_client(Connection& c);
  void read_hello(Connection& c);
  void refuse_tunnel(Connection& c, EgressFailure reason, const std::string& why);
  std::vector<const BoundSecret*> bound_secrets(const Connection& c) const;
  void start_brokering(Connection& c, std::vector<const BoundSecret*> bound);
  void broker(Connection& c);
  void relay(Connection& c);
  void rewrite_response_head(Connection& c);
  void deny(Connection& c, int status, const char* reason_phrase, EgressFailure reason,
            const std::string& why);
  void fail(Connection& c, int status, const char* reason_phrase, EgressFailure reason,
            const std::string& why);
  void respond(Connection& c, const std::string& response);
  void answer_unread(Fd client);
  void post_refusal(EgressDecision decision);
  void answer(Connection& c);
  bool watch(int fd, uint64_t data);
  void drop_upstream(Connection& c);
  void close(Connection& c);

  const std::vector<HostRule>& rules_;
  const EgressLimits& limits_;
  int epoll_;
  ResolverPool& resolver_;
  DecisionQueue& decisions_;
  const SecretBroker& broker_;
  std::optional<UpstreamTls> upstream_tls_;  // made on first use
  SpliceBudget pipes_;
  RefusalBudget refusals_;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  std::vector<uint64_t> again_;  // relays cut short for fairness, to go on after this round
  std::atomic<size_t> open_count_{0};
  uint64_t next_id_ = 1;
};

}  // namespace belljar
