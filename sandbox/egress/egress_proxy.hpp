#pragma once
// The egress proxy: the sandbox's only way out, run by the supervisor outside the sandbox.
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
// (tls_client_hello.hpp); only then are its bytes, unchanged, forwarded.
//
// It runs on its own thread with its own epoll loop, so a slow or stuck upstream or client can
// never stall the kernel's reactor or another connection: every socket is non-blocking (and
// edge-triggered), names are resolved on a small pool of threads, connections and
// per-connection buffers are bounded, every phase has a deadline, and a direction that turns
// out to be bulk moves by splice() through a pipe instead of through the proxy's memory. Every
// decision is queued for the kernel's thread, which polls decisions_fd() and writes the audit
// log and metrics.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/egress/egress_resolver.hpp"
#include "sandbox/os/fd.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

struct EgressDecision {
  std::string method;  // CONNECT, GET, ... ("" when no request could be read)
  std::string host;    // as requested, normalised when it could be
  uint16_t port = 0;
  std::string
      decision;      // "allowed", "denied" (the policy said no) or "failed" (it could not be done)
  std::string rule;  // the rule that allowed the host: "--allow-net example.com"; "" for none
  // A short code: not-allowlisted, port-not-allowed, private-address, bad-request,
  // sni-mismatch, sni-missing (denied);
  // resolve-failed, connect-failed, timeout, too-many-connections (failed); "" when allowed.
  std::string reason;
  std::string detail;   // one sentence for humans (the 403/502 body)
  std::string address;  // the address connected to, or refused
};

struct EgressLimits {
  size_t max_connections = 256;                    // then 503
  size_t buffer_bytes = 64 * 1024;                 // per connection, each way
  size_t max_head_bytes = 16 * 1024;               // a request head larger than this gets 431
  std::chrono::milliseconds head_timeout{30'000};  // to send a whole request head
  std::chrono::milliseconds resolve_timeout{10'000};
  std::chrono::milliseconds connect_timeout{10'000};  // per address tried
  std::chrono::milliseconds idle_timeout{300'000};    // no byte either way
  std::chrono::milliseconds answer_timeout{5'000};    // to deliver the proxy's own response
  // A tunnel to a name: its TLS ClientHello must arrive within these before a byte goes on.
  std::chrono::milliseconds hello_timeout{10'000};
  size_t max_hello_bytes = 16384;
  size_t max_spliced = 128;  // bulk directions moved by splice(), two descriptors each
  size_t resolver_threads = 4;
  size_t max_queued_decisions = 10'000;  // the kernel drains them; past this they are counted
};

class EgressProxy {
 public:
  // Starts the proxy's thread (and its resolvers) with every signal blocked.
  explicit EgressProxy(std::vector<HostRule> rules, EgressLimits limits = {},
                       NameResolver resolve = system_resolve);
  ~EgressProxy();  // stops the thread; every connection is closed
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Thread-safe. A sandbox's end of the SOCK_SEQPACKET pair; connections arrive on it until the
  // sandbox's end closes (the jail is gone). A restarted worker attaches its new one.
  void attach(Fd channel);

  // Readable (an eventfd) when decisions are waiting; take_decisions() empties it.
  int decisions_fd() const;
  struct Decisions {
    std::vector<EgressDecision> items;
    uint64_t dropped = 0;  // decisions that found the queue full since the last take
  };
  Decisions take_decisions();

  // Connections the proxy holds right now (tests check that they are freed).
  size_t open_connections() const;

 private:
  struct Loop;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace belljar
