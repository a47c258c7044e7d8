#include "kernel/jupyter/jupyter_frontend.hpp"

#include "kernel/protocol/json_field.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

JupyterFrontend::JupyterFrontend(ConnectionInfo& connection, std::string session_id,
                                 const PortRange& ports)
    : signer_(connection.key),
      wire_log_(10),
      session_id_(std::move(session_id)),
      transport_(connection, ports),
      ports_({{"shell_port", connection.shell_port},
              {"iopub_port", connection.iopub_port},
              {"stdin_port", connection.stdin_port},
              {"control_port", connection.control_port},
              {"hb_port", connection.hb_port}}) {}

void JupyterFrontend::add_poll_items(std::vector<zmq::pollitem_t>& items) {
  items.push_back({transport_.socket(Channel::control).handle(), 0, ZMQ_POLLIN, 0});
  items.push_back({transport_.socket(Channel::stdin_).handle(), 0, ZMQ_POLLIN, 0});
  items.push_back({transport_.socket(Channel::shell).handle(), 0, ZMQ_POLLIN, 0});
  transport_.add_monitor_items(items);
}

void JupyterFrontend::handle(const zmq::pollitem_t* items, Kernel& kernel) {
  // The gate says why it refused a peer before the peer's disconnect wakes the reactor; both
  // are logged before the requests of this wake-up are answered.
  for (const std::string& refusal : transport_.refusals())
    wire_log_.log("refused peer", refusal + " (nothing of it was kept)");
  for (const std::string& channel : transport_.disconnects(&items[3]))
    wire_log_.log("peer disconnected", "a peer of the " + channel + " channel went");
  // Control first: an interrupt or shutdown must not wait behind anything.
  if (items[0].revents & ZMQ_POLLIN) receive(Channel::control, kernel, 64);
  if (items[1].revents & ZMQ_POLLIN) receive(Channel::stdin_, kernel, 64);
  if (items[2].revents & ZMQ_POLLIN) receive(Channel::shell, kernel, 64);
}

void JupyterFrontend::collect_pending(Kernel& kernel) {
  receive(Channel::shell, kernel, 1 << 20);
}

void JupyterFrontend::receive(Channel channel, Kernel& kernel, int batch) {
  // A bounded batch per wake-up so one busy socket can't starve the others.
  for (int i = 0; i < batch; ++i) {
    auto frames = transport_.receive(channel);
    if (!frames) return;
    // The ROUTER names the connection first: the gate hears what became of its message.
    auto drop = [&](const std::string& why) {
      wire_log_.log(std::string("dropped ") + channel_name(channel) + " message", why);
      if (!frames->empty()) transport_.refused(channel, frames->front());
    };
    if (frames->empty()) {
      drop("over " + std::to_string(kMaxClientMessage >> 20) + " MiB in all");
      continue;
    }
    WireMessage message;
    WireFault fault = parse_wire_message(*frames, signer_, replay_, message);
    if (fault != WireFault::none) {
      drop(describe(fault));
      continue;
    }
    // Signed by this kernel for its clients (IOPub hands them to any subscriber): sent back,
    // it proves no key, and a client never speaks in the kernel's session.
    if (json_field(message.header, "session", std::string()) == session_id_) {
      drop("the kernel's own message, sent back");
      continue;
    }
    // The connection it came by is a client's: the gate keeps it past the unauthenticated bound.
    transport_.authenticated(channel, frames->front());
    try {
      deliver(channel, std::move(message), kernel);
    } catch (const std::exception& e) {
      // The kernel answers each request within its own boundary (requests.cpp); this one is
      // for what lies between: one message never ends the kernel.
      wire_log_.log(std::string("failed ") + channel_name(channel) + " message", e.what());
    }
  }
}

void JupyterFrontend::deliver(Channel channel, WireMessage message, Kernel& kernel) {
  switch (channel) {
    case Channel::control:
      kernel.submit_control(message);
      break;
    case Channel::shell:
      kernel.submit_shell(std::move(message));
      break;
    case Channel::stdin_:
      if (message.type() != "input_reply") {
        wire_log_.log("dropped stdin message", "unexpected " + message.type());
        break;
      }
      kernel.deliver_input(json_field(message.content, "value", ""));
      break;
  }
}

void JupyterFrontend::reply(Channel channel, const WireMessage& parent, const std::string& type,
                            nlohmann::json content, nlohmann::json metadata) {
  WireMessage message;
  message.identities = parent.identities;
  message.header = make_header(type, session_id_);
  message.parent_header = parent.header;
  message.metadata = std::move(metadata);
  message.content = std::move(content);
  transport_.send(channel, serialize_wire_message(message, signer_));
}

void JupyterFrontend::publish(const std::string& type, nlohmann::json content,
                              const WireMessage* parent) {
  publish_comm(type, std::move(content), nlohmann::json::object(), parent, {});
}

void JupyterFrontend::publish_comm(const std::string& type, nlohmann::json content,
                                   nlohmann::json metadata, const WireMessage* parent,
                                   std::vector<std::string> buffers) {
  WireMessage message;
  message.identities = {"kernel." + session_id_.substr(0, 8) + "." + type};
  message.header = make_header(type, session_id_);
  if (parent) message.parent_header = parent->header;
  message.metadata = std::move(metadata);
  message.content = std::move(content);
  message.buffers = std::move(buffers);
  transport_.publish(serialize_wire_message(message, signer_));
}

void JupyterFrontend::request_input(const WireMessage& parent, nlohmann::json content) {
  // Sent to the same client identity that sent the execute_request.
  reply(Channel::stdin_, parent, "input_request", std::move(content), nlohmann::json::object());
}

}  // namespace belljar
