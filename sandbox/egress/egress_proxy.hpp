#pragma once
// The egress proxy: the sandbox's only way out. It runs in the supervisor, on a thread of its
// own, outside the sandbox: nothing here is reachable from inside except through the inbox. It
// is built into belljar-egress.so (main_module.cpp), which a kernel loads only when its policy
// allows a host (sandbox/egress_api/egress_service.hpp is the supervisor's view of it).
//
// Inside, the jail's init listens on 127.0.0.1:3128 (kEgressPort, and [::1]) and passes every
// connection it accepts to us over a SOCK_SEQPACKET socket (SCM_RIGHTS, see fd_passing.hpp);
// from then on the proxy reads and writes the sandbox's TCP socket itself. A client speaks
// plain proxy HTTP: CONNECT host:port for TLS, absolute-form requests (GET http://host/path)
// for plain HTTP. The proxy checks the host against the allowlist (allowlist.hpp), resolves
// it itself, refuses names that resolve to non-public addresses unless the rule is local
// (address_policy.hpp), connects, and relays. Refusals answer 403 naming the host and why.
//
// What the allowlist judged is what goes out: upstream gets the request line's host as the Host
// header, whatever the client wrote (a shared front end routes by Host), and only the body its
// one Content-Length declares (nothing pipelined after it). A
// tunnel to a name must open with a TLS ClientHello whose SNI is that name
// (tls_client_hello.hpp); only then are its bytes, unchanged, forwarded. The one exception is
// a host with a bound secret (--secret): the proxy terminates that tunnel's TLS with the
// session's CA and puts the value into its requests (brokered_tunnel.hpp), and refuses plain
// HTTP to it.
//
// It runs on its own thread with its own epoll loop, so a slow or stuck upstream or client can
// never stall the kernel's reactor or another connection: every socket is non-blocking (and
// edge-triggered), names are resolved on a small pool of threads, connections and
// per-connection buffers are bounded, every phase has a deadline, and a direction that turns
// out to be bulk moves by splice() through a pipe instead of through the proxy's memory. Every
// decision is queued for the kernel's thread, which polls decisions_fd() and writes the audit
// log and metrics.
//
// Where the parts are: this file and egress_proxy.cpp are the thread, its epoll loop and the
// inbox (the jails' SOCK_SEQPACKET channels, the resolvers' answers, stop);
// egress_connection.{hpp,cpp} is one connection's state machine; egress_relay.{hpp,cpp} moves
// bytes one way (both directions use it); egress_buffer.{hpp,cpp} is the bounded byte queue;
// egress_decision.{hpp,cpp} the decisions and their queue; egress_limits.hpp the bounds.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/egress/egress_connection.hpp"
#include "sandbox/egress/egress_resolver.hpp"
#include "sandbox/egress_api/egress_decision.hpp"
#include "sandbox/egress_api/egress_limits.hpp"
#include "sandbox/os/fd.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

class EgressProxy {
 public:
  // Starts the proxy's thread (and its resolvers) with every signal blocked.
  // With a broker, tunnels to hosts with bound secrets are terminated (brokered_tunnel.hpp).
  explicit EgressProxy(std::vector<HostRule> rules, EgressLimits limits = {},
                       NameResolver resolve = system_resolve, SecretBroker broker = {});
  ~EgressProxy();  // stops the thread; every connection is closed
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Thread-safe. A sandbox's end of the SOCK_SEQPACKET pair; connections arrive on it until the
  // sandbox's end closes (the jail is gone). A restarted worker attaches its new one.
  void attach(Fd channel);

  // Readable (an eventfd) when decisions are waiting; take_decisions() empties it.
  int decisions_fd() const;
  using Decisions = DecisionQueue::Taken;
  Decisions take_decisions();

  // Connections the proxy holds right now (tests check that they are freed).
  size_t open_connections() const;

  // Thread-safe. The CPU seconds the proxy's thread has used: the session's work (what the
  // sandbox sends and asks), which the supervisor adds to its CPU.
  double thread_cpu_seconds() const;

 private:
  struct Loop;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace belljar
