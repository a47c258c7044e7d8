#pragma once
// The five Jupyter sockets. Heartbeat echoes on its own thread so a busy reactor never looks
// dead; everything else is polled by the reactor.
// The threat: any peer that can reach the ports (under `belljar launch`, the pod network) talks
// before it is authenticated, and libzmq buffers a message whole, every part of it, before the
// kernel sees it or its signature. So no peer reaches a ZMQ socket directly: each port is a
// door of the gate (zmtp_gate.hpp), which refuses the frame that takes one message past
// kMaxClientMessage in all before libzmq reads it, bounds what all peers together hold
// unfinished (kGateBudget), how many connect (kMaxConnections, kMaxPerAddress) and how long a
// peer may take to finish its handshake (kHandshakeBound) and to authenticate (kUnauthenticated
// Bound); the front door tells it which peers authenticated and which sent what it refused. Each
// refusal, and each disconnect (a socket monitor), is reported so the front door can log it,
// rate-limited.
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "kernel/protocol/connection_file.hpp"
#include "kernel/protocol/port_range.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "kernel/protocol/zmtp_gate.hpp"

namespace belljar {

// The largest message part a client may send. No real client needs more: a request reaches the
// worker as one frame of at most 64 MiB (kMaxWorkerFrame, kernel/session/worker_frames.hpp, and
// the worker's own MAX_FRAME), comm buffers in it base64-encoded, and MCP caps a line alike.
inline constexpr int64_t kMaxClientMessage = int64_t{64} << 20;
// Unfinished messages of all peers together: two of the largest. What a refused peer held is
// freed by libzmq's I/O thread a moment later, so the kernel's peak is about twice this.
inline constexpr uint64_t kGateBudget = uint64_t{2} * kMaxClientMessage;
// Connections to all five channels together: a frontend holds five, a few clients share one.
inline constexpr size_t kMaxConnections = 256;
// Unauthenticated connections from one source address to one channel: a client has one per
// channel until its first message is answered; a Jupyter Server a few more while it starts
// several of its clients' connections at once.
inline constexpr size_t kMaxPerAddress = 32;
// The bounds are generous for a loaded machine: a client's handshake takes a round trip, and
// jupyter_client and JupyterLab send kernel_info_request as soon as they connect (Jupyter
// Server's nudge too); a client that keeps a connection it never sends on (KernelManager's
// control socket, until shutdown) is closed and reconnects, unharmed. Not configurable:
// nothing outside may loosen them.
inline constexpr auto kHandshakeBound = std::chrono::seconds(10);
inline constexpr auto kUnauthenticatedBound = std::chrono::seconds(30);

class Transport {
 public:
  // Binds the five channels at info's ports; a port of 0 is picked within `range` (any port
  // when the range is 0..0) and written back into info, for a launcher to report.
  explicit Transport(ConnectionInfo& info, const PortRange& range = {});
  ~Transport();

  zmq::socket_t& socket(Channel channel);
  zmq::socket_t& iopub() { return iopub_; }
  // One whole multipart message, or nullopt when none is waiting (never blocks); no parts when
  // the message passed kMaxClientMessage in all (dropped).
  std::optional<std::vector<std::string>> receive(Channel channel);
  void send(Channel channel, const std::vector<std::string>& frames);
  void publish(const std::vector<std::string>& frames);
  // One poll item per socket's monitor; disconnects() reads those that are ready and names the
  // channel of each disconnected peer.
  void add_monitor_items(std::vector<zmq::pollitem_t>& items);
  std::vector<std::string> disconnects(const zmq::pollitem_t* items);
  // "<channel>: <why>" for each peer the gate refused since the last call.
  std::vector<std::string> refusals() { return gate_.take_refusals(); }
  // The front door accepted a message `channel` received from the peer with `identity` (its
  // routing id): the gate no longer bounds that connection as an unauthenticated one.
  void authenticated(Channel channel, const std::string& identity) {
    gate_.authenticated(channel_name(channel), identity);
  }
  // The front door refused it: the connection goes, unless it had authenticated.
  void refused(Channel channel, const std::string& identity) {
    gate_.refused(channel_name(channel), identity);
  }

 private:
  void send_on(zmq::socket_t& socket, const std::vector<std::string>& frames);
  void remove_files();
  // First, so it is the last to go: replies that linger at shutdown still pass through it.
  ZmtpGate gate_;
  zmq::context_t context_;
  zmq::socket_t shell_, control_, stdin_, iopub_, heartbeat_;
  static constexpr const char* kMonitored[] = {"shell", "control", "stdin", "iopub", "heartbeat"};
  zmq::socket_t monitors_[5];  // PAIR ends of each socket's monitor, in kMonitored's order
  std::thread heartbeat_thread_;
  std::string private_dir_;                // the sockets behind the doors
  std::vector<std::string> public_paths_;  // the doors, when they are unix sockets (ipc)
};

}  // namespace belljar
