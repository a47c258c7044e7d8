#pragma once
// The Jupyter front door: five ZMQ sockets, every incoming message authenticated (HMAC,
// replay guard) before the kernel sees it; bad ones are dropped and logged, rate-limited.
#include <optional>
#include <string>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/protocol/connection_file.hpp"
#include "kernel/protocol/replay_guard.hpp"
#include "kernel/protocol/signer.hpp"
#include "kernel/protocol/transport.hpp"
#include "kernel/session/frontend.hpp"

namespace belljar {

class JupyterFrontend : public Frontend {
 public:
  // Binds connection's ports; those that are 0 are picked within `ports` and written back.
  JupyterFrontend(ConnectionInfo& connection, std::string session_id, const PortRange& ports = {});

  void add_poll_items(std::vector<zmq::pollitem_t>& items) override;
  void handle(const zmq::pollitem_t* items, Kernel& kernel) override;
  void collect_pending(Kernel& kernel) override;
  void reply(Channel channel, const WireMessage& parent, const std::string& type,
             nlohmann::json content, nlohmann::json metadata) override;
  void publish(const std::string& type, nlohmann::json content, const WireMessage* parent) override;
  void publish_comm(const std::string& type, nlohmann::json content, nlohmann::json metadata,
                    const WireMessage* parent, std::vector<std::string> buffers) override;
  void request_input(const WireMessage& parent, nlohmann::json content) override;
  nlohmann::json connection_ports() const override { return ports_; }

 private:
  void receive(Channel channel, Kernel& kernel, int batch);
  void deliver(Channel channel, WireMessage message, Kernel& kernel);
  Signer signer_;
  ReplayGuard replay_;
  RateLimitedLog wire_log_;
  std::string session_id_;
  Transport transport_;
  nlohmann::json ports_;  // as bound (a port the connection file left 0 is the one picked)
};

}  // namespace belljar
