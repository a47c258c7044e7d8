#pragma once
// The doors between the Kernel's parts. A link (the egress link, the workspace link, the
// debugger link, ...) owns its own state and reaches outside it only through the doors its
// constructor takes, by reference: a reader of its header knows all it may touch, and its unit
// test drives it through fakes of these few interfaces, with no sandbox and no frontend. The core
// (kernel.hpp) holds the parts and wires them.
//   ClientDoor     what a client is told: iopub messages, replies, busy/idle (client_channel.hpp)
//   WorkerDoor     what the worker is sent: a frame, or its end for a fault (worker_link.hpp)
//   AuditRecords   the audit log (kernel/observability/audit_log.hpp)
// The threat is the worker's: nothing it sent reaches a client door but through a link's checks,
// redaction and budget; a door passes what it is given and decides nothing.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernel/protocol/wire_message.hpp"

namespace belljar {

class ClientDoor {
 public:
  virtual ~ClientDoor() = default;
  virtual void publish(const std::string& type, nlohmann::json content,
                       const WireMessage* parent) = 0;
  // A checked comm message of the worker's, with its metadata and binary buffers.
  virtual void publish_comm(const std::string& type, nlohmann::json content,
                            nlohmann::json metadata, const WireMessage* parent,
                            std::vector<std::string> buffers) = 0;
  virtual void reply(Channel channel, const WireMessage& parent, const std::string& type,
                     nlohmann::json content,
                     nlohmann::json metadata = nlohmann::json::object()) = 0;
  // busy or idle, parented to the request it is about.
  virtual void status(const std::string& state, const WireMessage* parent) = 0;
};

class WorkerDoor {
 public:
  virtual ~WorkerDoor() = default;
  // Queued on fd 3 and flushed as the socket takes it; dropped when there is no worker.
  virtual void send(const nlohmann::json& frame) = 0;
  // The worker broke a bound: it goes (its exit restarts the session), and nothing more is read
  // from or sent to it in the meantime.
  virtual void fault(const std::string& why) = 0;
};

}  // namespace belljar
