#pragma once
// The gateway's side door into a remote kernel: a TCP port (the "comm port", reported in the
// connection info) on which the gateway sends one JSON object per connection and closes —
// {"signum": N} to signal the kernel as `kill -N` would, {"shutdown": 1} to end it. Nothing is
// answered. The port is as open as the pod's network, and the protocol has no key, so what it
// can ask is exactly that and no more: an interrupt or a shutdown, decided here in the
// supervisor; nothing read on it reaches the sandbox. Every connection is read without blocking,
// bounded in size (4 KiB), time (5 s) and number (16 at once); what is malformed is logged
// (rate-limited) and changes nothing.
#include <chrono>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/protocol/port_range.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

enum class GatewayAction { none, interrupt, shutdown };

// What `kill -signum` asks of a kernel: 0 is a liveness poll (none), SIGINT interrupts the
// running cell, the signals whose default action ends a process end the kernel cleanly,
// the rest (SIGCHLD, SIGWINCH, SIGCONT, the stop signals) change nothing.
GatewayAction action_for_signal(int signum);

// One request's bytes (what a connection sent before it closed) → the action, or none with
// *why set when it is malformed.
GatewayAction parse_gateway_request(const std::string& body, std::string* why);

class CommPort {
 public:
  static constexpr size_t kMaxRequestBytes = 4096;
  static constexpr size_t kMaxConnections = 16;
  static constexpr std::chrono::seconds kRequestTimeout{5};

  // Binds ip:port within `range` (any port for 0..0) and listens. Throws UsageError.
  CommPort(const std::string& ip, const PortRange& range);
  uint16_t port() const { return port_; }

  void add_poll_items(std::vector<zmq::pollitem_t>& items) const;
  // Accepts and reads what the items say is ready; returns the actions of the requests that
  // completed, in order. `items` are the ones add_poll_items added.
  std::vector<GatewayAction> handle(const zmq::pollitem_t* items);
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const;

 private:
  struct Connection {
    Fd fd;
    std::string body;
    std::chrono::steady_clock::time_point deadline;
  };
  void accept_connections();
  // False once the connection is done with (closed by the peer, too large, failed).
  bool read_from(Connection& connection, std::vector<GatewayAction>& actions);

  Fd listener_;
  uint16_t port_ = 0;
  std::vector<Connection> connections_;
  RateLimitedLog log_{10};
};

}  // namespace belljar
