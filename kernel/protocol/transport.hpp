#pragma once
// The five Jupyter sockets. Heartbeat echoes on its own thread so a busy reactor never looks
// dead; everything else is polled by the reactor.
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "kernel/protocol/connection_file.hpp"
#include "kernel/protocol/port_range.hpp"
#include "kernel/protocol/wire_message.hpp"

namespace belljar {

class Transport {
 public:
  // Binds the five channels at info's ports; a port of 0 is picked within `range` (any port
  // when the range is 0..0) and written back into info, for a launcher to report.
  explicit Transport(ConnectionInfo& info, const PortRange& range = {});
  ~Transport();

  zmq::socket_t& socket(Channel channel);
  zmq::socket_t& iopub() { return iopub_; }
  // One whole multipart message, or nullopt when none is waiting (never blocks).
  std::optional<std::vector<std::string>> receive(Channel channel);
  void send(Channel channel, const std::vector<std::string>& frames);
  void publish(const std::vector<std::string>& frames);

 private:
  void send_on(zmq::socket_t& socket, const std::vector<std::string>& frames);
  zmq::context_t context_;
  zmq::socket_t shell_, control_, stdin_, iopub_, heartbeat_;
  std::thread heartbeat_thread_;
};

}  // namespace belljar
