#pragma once
// A kernel launched by a gateway: the Jupyter front door, plus the gateway's comm port polled
// by the same reactor. Requests, replies and outputs are the Jupyter front door's; the comm
// port only interrupts the running cell or shuts the kernel down (comm_port.hpp). The sealed
// connection info goes to the gateway once the sandbox stands (serving()), so a kernel that
// refuses to start never hands out ports that answer nothing.
#include "kernel/launch/comm_port.hpp"
#include "kernel/launch/response_address.hpp"
#include "kernel/session/frontend.hpp"

namespace belljar {

class GatewayFrontend : public Frontend {
 public:
  GatewayFrontend(Frontend& jupyter, CommPort& comm_port, ResponseAddress gateway,
                  std::string sealed_connection_info)
      : jupyter_(jupyter),
        comm_(comm_port),
        gateway_(std::move(gateway)),
        sealed_(std::move(sealed_connection_info)) {}

  // Sends the sealed connection info; throws (the kernel exits 1) when the gateway never answers.
  void serving() override;

  void add_poll_items(std::vector<zmq::pollitem_t>& items) override;
  void handle(const zmq::pollitem_t* items, Kernel& kernel) override;
  void collect_pending(Kernel& kernel) override { jupyter_.collect_pending(kernel); }
  std::optional<std::chrono::steady_clock::time_point> next_wakeup() const override;

  void reply(Channel channel, const WireMessage& parent, const std::string& type,
             nlohmann::json content, nlohmann::json metadata) override {
    jupyter_.reply(channel, parent, type, std::move(content), std::move(metadata));
  }
  void publish(const std::string& type, nlohmann::json content,
               const WireMessage* parent) override {
    jupyter_.publish(type, std::move(content), parent);
  }
  void publish_comm(const std::string& type, nlohmann::json content, nlohmann::json metadata,
                    const WireMessage* parent, std::vector<std::string> buffers) override {
    jupyter_.publish_comm(type, std::move(content), std::move(metadata), parent,
                          std::move(buffers));
  }
  void request_input(const WireMessage& parent, nlohmann::json content) override {
    jupyter_.request_input(parent, std::move(content));
  }

 private:
  Frontend& jupyter_;
  CommPort& comm_;
  ResponseAddress gateway_;
  std::string sealed_;
  size_t jupyter_items_ = 0;  // how many poll items the Jupyter front door added
};

}  // namespace belljar
