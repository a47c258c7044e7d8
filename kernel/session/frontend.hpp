#pragma once
// Where requests come from and where replies and outputs go. The session core (Kernel) is the
// same for every front door: Jupyter's ZMQ sockets, MCP on stdio, the one-shot runner.
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "kernel/protocol/wire_message.hpp"

namespace belljar {

class Kernel;

class Frontend {
 public:
  virtual ~Frontend() = default;

  // The reactor polls these along with the worker; handle() gets back the same items.
  virtual void add_poll_items(std::vector<zmq::pollitem_t>& items) = 0;
  virtual void handle(const zmq::pollitem_t* items, Kernel& kernel) = 0;
  // Hands the kernel every shell request that already arrived (stop_on_error aborts them).
  virtual void collect_pending(Kernel& kernel) = 0;
  // When handle() wants to run even if nothing is readable (a timer: MCP progress, work it
  // deferred); none by default, so the poll sleeps until the kernel's own deadlines.
  virtual std::optional<std::chrono::steady_clock::time_point> next_wakeup() const {
    return std::nullopt;
  }

  // Called once, when the first sandbox stands and before the first request is read: a
  // launcher tells its gateway where to connect only then. May throw: the kernel does not start.
  virtual void serving() {}

  virtual void reply(Channel channel, const WireMessage& parent, const std::string& type,
                     nlohmann::json content, nlohmann::json metadata) = 0;
  virtual void publish(const std::string& type, nlohmann::json content,
                       const WireMessage* parent) = 0;
  // A comm message, with its metadata (ipywidgets' protocol version) and binary buffers: the
  // Jupyter front door sends them (buffers as extra frames); the others have no use for them
  // and publish the content alone.
  virtual void publish_comm(const std::string& type, nlohmann::json content,
                            nlohmann::json metadata, const WireMessage* parent,
                            std::vector<std::string> buffers) {
    (void)metadata;
    (void)buffers;
    publish(type, std::move(content), parent);
  }
  virtual void request_input(const WireMessage& parent, nlohmann::json content) = 0;
  // The ports a connect_request is answered with (shell, iopub, stdin, control, hb); null for
  // a front door without them (MCP, a terminal).
  virtual nlohmann::json connection_ports() const { return nullptr; }
};

}  // namespace belljar
