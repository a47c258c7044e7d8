// The egress proxy's connections and their state machine (egress_connection.hpp).
#include "sandbox/egress/egress_connection.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "sandbox/egress/tls_client_hello.hpp"
#include "sandbox/egress_api/address_policy.hpp"
#include "sandbox/os/host_port.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

std::string ports_text(const std::vector<uint16_t>& ports) {
  std::string text;
  for (uint16_t p : ports) text += (text.empty() ? "" : ", ") + std::to_string(p);
  return text;
}

}  // namespace

Connections::Connections(const std::vector<HostRule>& rules, const EgressLimits& limits, int epoll,
                         ResolverPool& resolver, DecisionQueue& decisions,
                         const SecretBroker& broker)
    : rules_(rules),
      limits_(limits),
      epoll_(epoll),
      resolver_(resolver),
      decisions_(decisions),
      broker_(broker),
      pipes_(limits.max_spliced),
      refusals_(limits.refusal_burst, limits.refusals_per_second) {}

void Connections::adopt(Fd client) {
  // Out of refusals: this one costs a send and a close, and no byte of it is read.
  if (!refusals_.available(EgressClock::now())) return answer_unread(std::move(client));
  // Whatever arrives is checked: a connected stream socket, or nothing.
  struct stat st {};
  int type = 0;
  socklen_t len = sizeof type;
  if (::fstat(client.get(), &st) != 0 || !S_ISSOCK(st.st_mode) ||
      ::getsockopt(client.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
    return;
  ::fcntl(client.get(), F_SETFL, ::fcntl(client.get(), F_GETFL) | O_NONBLOCK);
  if (connections_.size() >= limits_.max_connections) {
    std::string why = "the egress proxy is at its limit of " +
                      std::to_string(limits_.max_connections) +
                      " open connections; try again when some have closed";
    std::string response = proxy_response(
        503, "Service Unavailable", "belljar: " + why + "\n",
        {{"X-Belljar-Error", std::string(failure_name(EgressFailure::too_many_connections))}});
    ssize_t ignored =
        ::send(client.get(), response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
    post_refusal(
        {"", "", 0, EgressVerdict::failed, "", EgressFailure::too_many_connections, why, ""});
    return;
  }
  int one = 1;
  ::setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto c = std::make_unique<Connection>();
  c->id = next_id_++;
  c->client = std::move(client);
  c->up.buffer = Buffer(limits_.buffer_bytes);
  c->down.buffer = Buffer(limits_.buffer_bytes);
  c->deadline = EgressClock::now() + limits_.head_timeout;
  if (!watch(c->client.get(), epoll_tag(c->id, kClient))) return;
  connections_.emplace(c->id, std::move(c));
  open_count_ = connections_.size();
}

// ---- events and deadlines ---------------------------------------------------------------

void Connections::on_resolved(uint64_t id, Resolution result) {
  if (auto it = connections_.find(id);
      it != connections_.end() && it->second->phase == Phase::resolving)
    resolved(*it->second, std::move(result));
}

void Connections::resume() {
  std::vector<uint64_t> resume;
  resume.swap(again_);
  for (uint64_t id : resume)
    if (auto it = connections_.find(id); it != connections_.end()) {
      if (it->second->phase == Phase::relaying)
        relay(*it->second);
      else if (it->second->phase == Phase::brokering)
        broker(*it->second);
    }
}

int Connections::next_timeout_ms() const {
  if (connections_.empty()) return -1;
  auto next = EgressClock::time_point::max();
  for (const auto& [id, c] : connections_) next = std::min(next, c->deadline);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(next - EgressClock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms + 1, 0, 60'000));
}

void Connections::on_event(uint64_t id, EgressSide side, uint32_t events) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  // A hang-up or an error shows up as "readable/writable": the next call says which.
  bool in = events & (EPOLLIN | EPOLLHUP | EPOLLERR),
       out = events & (EPOLLOUT | EPOLLHUP | EPOLLERR);
  if (side == kClient) {
    c.client_in = c.client_in || in;
    c.client_out = c.client_out || out;
  } else {
    if (!c.upstream) return;  // an event for a connection attempt already given up
    c.upstream_in = c.upstream_in || in;
    c.upstream_out = c.upstream_out || out;
  }
  if (side == kUpstream && c.phase == Phase::connecting) {
    finish_connect(c);
    return;
  }
  switch (c.phase) {
    case Phase::head:
      read_head(c);
      break;
    case Phase::relaying:
      relay(c);
      break;
    case Phase::brokering:
      broker(c);
      break;
    case Phase::hello:
      if (side == kClient) read_hello(c);
      break;
    case Phase::answering:
    case Phase::lingering:
      answer(c);
      break;
    default:
      break;
  }
}

void Connections::expire(EgressClock::time_point now) {
  std::vector<uint64_t> due;
  for (const auto& [id, c] : connections_)
    if (c->deadline <= now) due.push_back(id);
  for (uint64_t id : due) {
    auto it = connections_.find(id);
    if (it == connections_.end()) continue;
    Connection& c = *it->second;
    switch (c.phase) {
      case Phase::resolving:
        fail(c, 504, "Gateway Timeout", EgressFailure::timeout,
             "timed out resolving " + c.host.name);
        break;
      case Phase::connecting:
        c.last_error = "timed out";
        drop_upstream(c);
        connect_next(c);
        break;
      case Phase::hello:
        refuse_tunnel(c, EgressFailure::sni_missing,
                      "no TLS ClientHello within " +
                          std::to_string(limits_.hello_timeout.count() / 1000) + " s");
        break;
      default:  // a slow request head, an idle relay, a client that won't read its answer
        close(c);
        break;
    }
  }
}

// ---- the request ------------------------------------------------------------------------

void Connections::read_head(Connection& c) {
  while (c.client_in) {
    ssize_t n =
        c.up.buffer.fill(c.client.get(), limits_.max_head_bytes + 1 -
                                             std::min(c.up.buffer.size(), limits_.max_head_bytes));
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
      close(c);  // gone before it asked for anything
      return;
    }
    if (n < 0) {
      c.client_in = false;
      break;
    }
    if (auto end = find_head_end(c.up.buffer.view())) {
      start_request(c, *end);
      return;
    }
    if (c.up.buffer.size() > limits_.max_head_bytes) {
      deny(c, 431, "Request Header Fields Too Large", EgressFailure::bad_request,
           "the request head is larger than " + std::to_string(limits_.max_head_bytes) + " bytes");
      return;
    }
  }
}

void Connections::start_request(Connection& c, size_t head_length) {
  try {
    c.request = parse_request_head(c.up.buffer.view().substr(0, head_length));
  } catch (const HttpHeadError& e) {
    deny(c, 400, "Bad Request", EgressFailure::bad_request,
         std::string("a malformed request: ") + e.what());
    return;
  }
  c.up.buffer.consume(head_length);
  auto host = normalize_host(c.request.host);
  if (!host) {
    deny(c, 400, "Bad Request", EgressFailure::bad_request,
         "\"" + c.request.host + "\" is not a host name or an IP address");
    return;
  }
  c.host = *host;
  HostVerdict verdict = match_host(rules_, c.host, c.request.port);
  if (verdict.kind == HostVerdict::Kind::host_not_allowed) {
    deny(c, 403, "Forbidden", EgressFailure::not_allowlisted,
         c.host.name + " is not on this kernel's allowlist (--allow-net)");
    return;
  }
  if (verdict.kind == HostVerdict::Kind::port_not_allowed) {
    deny(c, 403, "Forbidden", EgressFailure::port_not_allowed,
         "port " + std::to_string(c.request.port) + " is not allowed for " + c.host.name +
             " (allowed: " + ports_text(verdict.allowed_ports) + ")");
    return;
  }
  c.rule = verdict.rule;
  if (!c.request.tunnel) {
    // A bound secret's value goes only into TLS: over plain HTTP the host gets nothing, and
    // the client is told why rather than left to wonder at a 401.
    if (auto bound = bound_secrets(c); !bound.empty()) {
      std::string bindings;
      for (const auto* secret : bound)
        for (const auto& rule : secret->hosts)
          if (match_host({rule}, c.host, c.request.port).kind == HostVerdict::Kind::allowed)
            bindings += (bindings.empty() ? "" : ", ") + rule.secret;
      deny(c, 403, "Forbidden", EgressFailure::secret_needs_tls,
           "a secret is bound to " + host_port(c.host.name, c.request.port) + " (" + bindings +
               "): its value is only ever sent over TLS; use https:// (the proxy's CONNECT)");
      return;
    }
    if (!check_plain_request(c)) return;
  }
  if (c.host.literal) {
    // The rule names this very address: allowed whatever its scope, as the user asked.
    c.addresses = {*c.host.literal};
    connect_next(c);
    return;
  }
  if (!resolver_.submit(c.id, c.host.name)) {
    fail(c, 503, "Service Unavailable", EgressFailure::too_many_connections,
         "too many names are being resolved; try again");
    return;
  }
  c.phase = Phase::resolving;
  c.deadline = EgressClock::now() + limits_.resolve_timeout;
}

void Connections::resolved(Connection& c, Resolution result) {
  if (result.addresses.empty()) {
    fail(c, 502, "Bad Gateway", EgressFailure::resolve_failed,
         "cannot resolve " + c.host.name + ": " + result.error);
    return;
  }
  // DNS decides nothing on its own: a name that lands inside (rebinding, a hostile record,
  // the metadata service) is refused unless the rule says the host is local.
  std::vector<IpAddress> usable;
  std::optional<std::pair<IpAddress, AddressScope>> refused;
  for (const auto& address : result.addresses) {
    AddressScope scope = classify(address);
    if (scope == AddressScope::public_unicast || c.rule->local)
      usable.push_back(address);
    else if (!refused)
      refused = {address, scope};
  }
  if (usable.empty()) {
    c.addresses = {refused->first};
    deny(c, 403, "Forbidden", EgressFailure::private_address,
         c.host.name + " resolves to " + refused->first.text() + ", " +
             describe_scope(refused->second) +
             "; only a host allowed with --allow-local-net may reach loopback or private "
             "networks");
    return;
  }
  c.addresses = std::move(usable);
  connect_next(c);
}

void Connections::connect_next(Connection& c) {
  while (c.next_address < c.addresses.size() && c.next_address < 8) {
    const IpAddress& address = c.addresses[c.next_address++];
    sockaddr_storage storage{};
    socklen_t length;
    if (address.family == AF_INET) {
      auto* sin = reinterpret_cast<sockaddr_in*>(&storage);
      sin->sin_family = AF_INET;
      sin->sin_port = htons(c.request.port);
      std::memcpy(&sin->sin_addr, address.bytes.data(), 4);
      length = sizeof(sockaddr_in);
    } else {
      auto* sin6 = reinterpret_cast<sockaddr_in6*>(&storage);
      sin6->sin6_family = AF_INET6;
      sin6->sin6_port = htons(c.request.port);
      std::memcpy(&sin6->sin6_addr, address.bytes.data(), 16);
      length = sizeof(sockaddr_in6);
    }
    Fd sock(::socket(address.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!sock) {
      c.last_error = errno_text(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(sock.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc = ::connect(sock.get(), reinterpret_cast<sockaddr*>(&storage), length);
    if (rc != 0 && errno != EINPROGRESS) {
      c.last_error = errno_text(errno);
      continue;
    }
    if (!watch(sock.get(), epoll_tag(c.id, kUpstream))) {
      c.last_error = errno_text(errno);
      continue;
    }
    c.upstream = std::move(sock);
    c.upstream_in = c.upstream_out = false;
    if (rc == 0) {
      connected(c);
      return;
    }
    c.phase = Phase::connecting;
    c.deadline = EgressClock::now() + limits_.connect_timeout;
    return;
  }
  std::string target = host_port(c.host.name, c.request.port);
  bool timed_out = c.last_error == "timed out";
  fail(c, timed_out ? 504 : 502, timed_out ? "Gateway Timeout" : "Bad Gateway",
       timed_out ? EgressFailure::timeout : EgressFailure::connect_failed,
       "cannot connect to " + target + ": " + c.last_error);
}

void Connections::finish_connect(Connection& c) {
  int error = 0;
  socklen_t len = sizeof error;
  if (::getsockopt(c.upstream.get(), SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
  if (error == 0) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    if (::getpeername(c.upstream.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
      c.upstream_out = false;  // not connected yet (a stale wakeup): the connect's own comes
      return;
    }
    c.upstream_out = true;
    connected(c);
    return;
  }
  c.last_error = errno_text(error);
  drop_upstream(c);
  connect_next(c);
}

void Connections::connected(Connection& c) {
  const IpAddress& address = c.addresses[c.next_address - 1];
  if (c.request.tunnel && c.host.literal) {
    // A rule that names an address: no SNI to check, but a bound secret is still brokered.
    if (auto bound = bound_secrets(c); !bound.empty()) return start_brokering(c, std::move(bound));
  }
  if (c.request.tunnel && !c.host.literal) {
    // A name: the decision waits for the ClientHello's SNI (read_hello).
    c.down.buffer.append("HTTP/1.1 200 Connection established\r\n\r\n");
    c.phase = Phase::hello;
    c.deadline = EgressClock::now() + limits_.hello_timeout;
    read_hello(c);
    return;
  }
  decisions_.post({c.request.method, c.host.name, c.request.port, EgressVerdict::allowed,
                   rule_flag_text(*c.rule), EgressFailure::none, "", address.text()});
  c.phase = Phase::relaying;
  c.deadline = EgressClock::now() + limits_.idle_timeout;
  if (c.request.tunnel) {
    // A rule that names an address: whatever runs there was allowed, TLS or not, any SNI.
    c.down.buffer.append("HTTP/1.1 200 Connection established\r\n\r\n");
  } else {
    c.up.buffer.splice(0, 0, upstream_request_head(c.request));
    c.response_head_pending = true;
  }
  relay(c);
}

// ---- what goes out is what was allowed ----------------------------------------------------

// A plain request's body must be framed by one Content-Length, so nothing after it can pass
// as a second request (whose Host the proxy would never have seen). Its own Host is replaced
// by the request line's (upstream_request_head).
bool Connections::check_plain_request(Connection& c) {
  if (c.request.chunked) {
    deny(c, 411, "Length Required", EgressFailure::bad_request,
         "a chunked request body is not forwarded over plain HTTP (where it ends is where a "
         "smuggled request would begin); send Content-Length");
    return false;
  }
  uint64_t body = c.request.content_length.value_or(0);
  // What came with the head beyond the body is dropped, never forwarded.
  if (c.up.buffer.size() > body) c.up.buffer.splice(body, c.up.buffer.size() - body, "");
  c.body_left = body - c.up.buffer.size();
  return true;
}

// Reads and drops what a plain client sends after its body; -1 on an error, 1 if anything
// (or end of file) was read, 0 otherwise.
int Connections::discard_from_client(Connection& c) {
  char sink[16384];
  ssize_t n;
  while ((n = ::recv(c.client.get(), sink, sizeof sink, 0)) < 0 && errno == EINTR) {
  }
  if (n == 0) {
    c.client_eof = true;
    return 1;
  }
  if (n < 0) {
    if (errno != EAGAIN) return -1;
    c.client_in = false;
    return 0;
  }
  c.discarded += static_cast<size_t>(n);
  return c.discarded > (1u << 20) ? -1 : 1;
}

// A tunnel to a name: deliver the 200, then read (and hold) the client's first bytes until
// they make a ClientHello; its SNI must be the CONNECT host.
void Connections::read_hello(Connection& c) {
  while (c.client_out && !c.down.buffer.empty()) {
    size_t want = c.down.buffer.size();
    ssize_t n = c.down.buffer.drain(c.client.get());
    if (n < 0 && errno != EAGAIN) return close(c);
    if (n < static_cast<ssize_t>(want)) c.client_out = false;
  }
  for (;;) {
    ClientHelloScan scan = scan_client_hello(c.up.buffer.view(), limits_.max_hello_bytes);
    if (scan.status == ClientHelloScan::Status::malformed)
      return refuse_tunnel(c, EgressFailure::sni_missing,
                           "no usable TLS ClientHello: " + scan.error);
    if (scan.status == ClientHelloScan::Status::complete) {
      if (!scan.server_name)
        return refuse_tunnel(c, EgressFailure::sni_missing,
                             "the TLS ClientHello names no server (SNI); a tunnel to a name "
                             "must name it");
      auto named = normalize_host(*scan.server_name);
      if (!named || named->literal || named->name != c.host.name)
        return refuse_tunnel(c, EgressFailure::sni_mismatch,
                             "the TLS ClientHello names \"" + scan.server_name->substr(0, 255) +
                                 "\", not " + c.host.name);
      if (auto bound = bound_secrets(c); !bound.empty())
        return start_brokering(c, std::move(bound));  // one record per request, later
      decisions_.post({c.request.method, c.host.name, c.request.port, EgressVerdict::allowed,
                       rule_flag_text(*c.rule), EgressFailure::none, "",
                       c.addresses[c.next_address - 1].text()});
      c.phase = Phase::relaying;
      c.deadline = EgressClock::now() + limits_.idle_timeout;
      relay(c);  // the ClientHello, as it came, goes first
      return;
    }
    if (!c.client_in || c.client_eof) return;
    ssize_t n =
        c.up.buffer.fill(c.client.get(), limits_.max_hello_bytes + 1 -
                                             std::min(c.up.buffer.size(), limits_.max_hello_bytes));
    if (n == 0) return close(c);  // gone before it said anything
    if (n < 0) {
      if (errno != EAGAIN) return close(c);
      c.client_in = false;
      return;
    }
  }
}

// The client already has its 200: a TLS alert tells its library why the tunnel closes.
void Connections::refuse_tunnel(Connection& c, EgressFailure reason, const std::string& why) {
  post_refusal({c.request.method, c.host.name, c.request.port, verdict_of(reason),
                rule_flag_text(*c.rule), reason, why,
                c.next_address > 0 && c.next_address <= c.addresses.size()
                    ? c.addresses[c.next_address - 1].text()
                    : ""});
  respond(c, std::string(tls_access_denied_alert()));
}

// ---- brokering: a tunnel to a host with a bound secret ----------------------------------

std::vector<const BoundSecret*> Connections::bound_secrets(const Connection& c) const {
  if (!broker_.active()) return {};
  return broker_.secrets->bound_to(c.host, c.request.port);
}

// The tunnel's 200 is out and its ClientHello read (held in c.up.buffer): from here the proxy
// is the client's TLS server and the upstream's TLS client.
void Connections::start_brokering(Connection& c, std::vector<const BoundSecret*> bound) {
  std::string error;
  OpenSslPtr<SSL> client_tls = broker_.ca->server_session(c.host, error);
  if (!upstream_tls_) {
    try {
      upstream_tls_.emplace(broker_.upstream_ca_pem);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  OpenSslPtr<SSL> upstream_tls =
      client_tls && upstream_tls_ ? upstream_tls_->client_session(c.host, error) : nullptr;
  if (!upstream_tls) return refuse_tunnel(c, EgressFailure::upstream_certificate, error);
  std::string host_header =
      c.request.port == 443 ? bracketed_host(c.host.name) : host_port(c.host.name, c.request.port);
  c.brokered = std::make_unique<BrokeredTunnel>(
      std::move(client_tls), std::move(upstream_tls),
      BrokeredHttp(std::move(bound), *broker_.secrets, host_header), c.up.buffer.view());
  c.up.buffer.consume(c.up.buffer.size());
  if (c.request.tunnel && c.host.literal && c.down.buffer.empty())
    c.down.buffer.append("HTTP/1.1 200 Connection established\r\n\r\n");
  c.phase = Phase::brokering;
  c.deadline = EgressClock::now() + limits_.idle_timeout;
  broker(c);
}

void Connections::broker(Connection& c) {
  // The tunnel's own 200, for a rule that names an address (read_hello sent it for a name).
  while (!c.down.buffer.empty() && c.client_out) {
    size_t want = c.down.buffer.size();
    ssize_t n = c.down.buffer.drain(c.client.get());
    if (n < 0 && errno != EAGAIN) return close(c);
    if (n < static_cast<ssize_t>(want)) c.client_out = false;
  }
  if (!c.down.buffer.empty()) return;
  TunnelStep step = c.brokered->step(c.client_end(), c.upstream_end());
  std::string address = c.addresses[c.next_address - 1].text();
  for (auto& exchange : step.exchanges) {
    EgressDecision decision{exchange.method,
                            c.host.name,
                            c.request.port,
                            EgressVerdict::allowed,
                            rule_flag_text(*c.rule),
                            EgressFailure::none,
                            "",
                            address};
    decision.secret_use = std::move(exchange.use);
    decisions_.post(std::move(decision));
  }
  if (step.failure) {
    EgressDecision decision{c.request.method,        c.host.name,
                            c.request.port,          verdict_of(step.failure->reason),
                            rule_flag_text(*c.rule), step.failure->reason,
                            step.failure->why,       address};
    post_refusal(std::move(decision));
  }
  if (step.over) return close(c);
  if (step.moved) {
    c.deadline = EgressClock::now() + limits_.idle_timeout;
    again_.push_back(c.id);  // it may have stopped at its round limit: another turn
  }
}

// ---- relaying ---------------------------------------------------------------------------

// Moves what it can both ways until nothing moves (egress_relay.hpp), then passes each side's
// end of file on: a tunnel half-closes, a plain request ends with its response.
void Connections::relay(Connection& c) {
  bool moved_any = false;
  for (int round = 0;; ++round) {
    if (round == 16) {
      again_.push_back(c.id);  // fairness: the others get a turn, then this one goes on
      break;
    }
    bool moved = false;
    // client -> upstream. Only tunnels go bulk upwards: a plain request's body is counted
    // through the buffer, and what follows it (a pipelined request) is never sent on.
    Framing upwards;
    upwards.may_go_bulk = c.request.tunnel;
    if (!c.request.tunnel) {
      upwards.read_limit = c.body_left;
      if (!c.up.splice && c.body_left == 0 && c.client_in && !c.client_eof) {
        int r = discard_from_client(c);
        if (r < 0) return close(c);
        moved = moved || r > 0;
      }
    }
    RelayStep step = relay_step(c.up, c.client_end(), c.upstream_end(), upwards, pipes_);
    if (step.broken) return close(c);
    if (!c.request.tunnel) c.body_left -= step.read;
    moved = moved || step.moved;
    if (c.client_eof && c.up.drained() && !c.upstream_shut) {
      // A plain HTTP client that hangs up is gone: free its upstream at once. A tunnel's
      // half-close is passed on, and the tunnel ends when both sides have.
      if (!c.request.tunnel) return close(c);
      ::shutdown(c.upstream.get(), SHUT_WR);
      c.upstream_shut = true;
    }
    // upstream -> client. A plain response's head is rewritten before it goes.
    Framing downwards;
    downwards.may_go_bulk = !c.response_head_pending;
    downwards.sendable = [&c, this] {
      if (c.response_head_pending) rewrite_response_head(c);
      return c.response_head_pending ? c.head_from : c.down.buffer.size();
    };
    step = relay_step(c.down, c.upstream_end(), c.client_end(), downwards, pipes_);
    if (step.broken) return close(c);
    if (c.response_head_pending) c.head_from -= step.sent;
    moved = moved || step.moved;
    if (c.upstream_eof && c.down.drained() && !c.response_head_pending) {
      if (!c.request.tunnel) return close(c);  // the response is complete: Connection: close
      if (!c.client_shut) {
        ::shutdown(c.client.get(), SHUT_WR);
        c.client_shut = true;
      }
    }
    if (c.client_shut && c.upstream_shut) return close(c);
    moved_any = moved_any || moved;
    if (!moved) break;
  }
  if (moved_any) c.deadline = EgressClock::now() + limits_.idle_timeout;
}

void Connections::rewrite_response_head(Connection& c) {
  while (c.response_head_pending) {
    std::string_view rest = c.down.buffer.view().substr(c.head_from);
    auto end = find_head_end(rest);
    if (!end) {
      // No whole head within the buffer, or none at all: pass what comes through untouched.
      if (c.upstream_eof || c.down.buffer.size() >= limits_.buffer_bytes)
        c.response_head_pending = false;
      return;
    }
    ResponseHead head;
    try {
      head = parse_response_head(rest.substr(0, *end));
    } catch (const HttpHeadError&) {
      c.response_head_pending = false;
      return;
    }
    if (head.status >= 100 && head.status < 200 && head.status != 101) {
      c.head_from += *end;  // 100 Continue and friends go as they are; the real head follows
      continue;
    }
    if (head.status != 101) c.down.buffer.splice(c.head_from, *end, client_response_head(head));
    c.response_head_pending = false;
  }
}

// A pipe for a bulk direction, if the budget allows (each costs two descriptors).
// ---- the proxy's own answers ------------------------------------------------------------

void Connections::deny(Connection& c, int status, const char* reason_phrase, EgressFailure reason,
                       const std::string& why) {
  std::string subject = c.host.name.empty() ? c.request.host : c.host.name;
  std::string body = subject.empty() ? "belljar: egress proxy: " + why + "\n"
                                     : "belljar: egress to " + host_port(subject, c.request.port) +
                                           " refused: " + why + "\n";
  post_refusal({c.request.method, subject, c.request.port, verdict_of(reason),
                c.rule ? rule_flag_text(*c.rule) : "", reason, why,
                c.addresses.empty() ? "" : c.addresses.front().text()});
  respond(c, proxy_response(status, reason_phrase, body,
                            {{"X-Belljar-Denied", std::string(failure_name(reason))}}));
}

void Connections::fail(Connection& c, int status, const char* reason_phrase, EgressFailure reason,
                       const std::string& why) {
  post_refusal({c.request.method, c.host.name, c.request.port, verdict_of(reason),
                c.rule ? rule_flag_text(*c.rule) : "", reason, why,
                c.next_address > 0 && c.next_address <= c.addresses.size()
                    ? c.addresses[c.next_address - 1].text()
                    : ""});
  respond(c, proxy_response(status, reason_phrase, "belljar: " + why + "\n",
                            {{"X-Belljar-Error", std::string(failure_name(reason))}}));
}

void Connections::post_refusal(EgressDecision decision) {
  refusals_.spend(EgressClock::now());
  decisions_.post(std::move(decision));
}

// The same bytes for every connection past the refusal budget: nothing of the request is read
// or parsed, nothing is queued but a count. What the client already sent is read once and
// dropped, so that closing rarely resets the connection before the answer is read.
void Connections::answer_unread(Fd client) {
  static const std::string response = proxy_response(
      403, "Forbidden",
      "belljar: egress proxy: this session was refused too many connections in a short time; "
      "this one was answered unread. Stop asking for hosts the policy does not allow, and "
      "connections are served again within seconds.\n",
      {{"X-Belljar-Denied", std::string(failure_name(EgressFailure::refusals_rate_limited))}});
  decisions_.count_unread();
  ssize_t ignored =
      ::send(client.get(), response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  char sink[4096];
  ignored = ::recv(client.get(), sink, sizeof sink, MSG_DONTWAIT);
  (void)ignored;
}

void Connections::respond(Connection& c, const std::string& response) {
  drop_upstream(c);
  c.up.buffer = Buffer(0);
  c.down.buffer = Buffer(limits_.buffer_bytes);
  c.down.buffer.append(response);
  c.phase = Phase::answering;
  c.deadline = EgressClock::now() + limits_.answer_timeout;
  answer(c);
}

// Delivers the answer, then reads (and drops) what the client still sends until it closes:
// closing with unread bytes would reset the connection and could destroy the answer.
void Connections::answer(Connection& c) {
  if (c.phase == Phase::answering) {
    while (!c.down.buffer.empty()) {
      if (!c.client_out) return;
      size_t want = c.down.buffer.size();
      ssize_t n = c.down.buffer.drain(c.client.get());
      if (n < 0 && errno == EAGAIN)
        n = 0;
      else if (n <= 0)
        return close(c);
      if (static_cast<size_t>(n) < want) c.client_out = false;
    }
    ::shutdown(c.client.get(), SHUT_WR);
    c.phase = Phase::lingering;
    c.deadline = EgressClock::now() + std::chrono::seconds(2);
  }
  char sink[16384];
  while (c.client_in) {
    ssize_t n = ::recv(c.client.get(), sink, sizeof sink, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      c.client_in = false;
      break;
    }
    if (n <= 0) return close(c);
    c.discarded += static_cast<size_t>(n);
    if (c.discarded > (1u << 20)) return close(c);
  }
}

// ---- bookkeeping ------------------------------------------------------------------------

// Each socket is registered once, for everything, edge-triggered: no epoll_ctl() per
// buffer that fills or drains. The flags in Connection carry what the edges said.
bool Connections::watch(int fd, uint64_t data) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = data;
  return ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) == 0;
}

void Connections::drop_upstream(Connection& c) {
  if (!c.upstream) return;
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.upstream.get(), nullptr);
  c.upstream.reset();
  c.upstream_in = c.upstream_out = false;
}

void Connections::close(Connection& c) {
  pipes_.release((c.up.splice ? 1 : 0) + (c.down.splice ? 1 : 0));
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.client.get(), nullptr);
  drop_upstream(c);
  connections_.erase(c.id);  // closes the client's socket (and frees c)
  open_count_ = connections_.size();
}

}  // namespace belljar
