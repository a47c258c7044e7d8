#include "kernel/protocol/transport.hpp"

#include "sandbox/policy/policy.hpp"

namespace belljar {

const char* channel_name(Channel channel) {
  switch (channel) {
    case Channel::shell:
      return "shell";
    case Channel::control:
      return "control";
    case Channel::stdin_:
      return "stdin";
  }
  return "?";
}

namespace {
void bind_socket(zmq::socket_t& socket, const std::string& endpoint) {
  socket.set(zmq::sockopt::linger, 1000);  // let the last replies out at shutdown
  try {
    socket.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw UsageError("cannot bind " + endpoint + ": " + e.what());
  }
}
}  // namespace

Transport::Transport(const ConnectionInfo& info)
    : context_(1),
      shell_(context_, zmq::socket_type::router),
      control_(context_, zmq::socket_type::router),
      stdin_(context_, zmq::socket_type::router),
      iopub_(context_, zmq::socket_type::pub),
      heartbeat_(context_, zmq::socket_type::router) {
  bind_socket(shell_, info.endpoint(info.shell_port));
  bind_socket(control_, info.endpoint(info.control_port));
  bind_socket(stdin_, info.endpoint(info.stdin_port));
  bind_socket(iopub_, info.endpoint(info.iopub_port));
  bind_socket(heartbeat_, info.endpoint(info.hb_port));
  heartbeat_.set(zmq::sockopt::linger, 0);
  heartbeat_thread_ = std::thread([this] {
    try {
      zmq_proxy(heartbeat_.handle(), heartbeat_.handle(), nullptr);  // echo each ping back
    } catch (const zmq::error_t&) {
      // ETERM: the context is closing.
    }
  });
}

Transport::~Transport() {
  context_.shutdown();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  shell_.close();
  control_.close();
  stdin_.close();
  iopub_.close();
  heartbeat_.close();
}

zmq::socket_t& Transport::socket(Channel channel) {
  switch (channel) {
    case Channel::shell:
      return shell_;
    case Channel::control:
      return control_;
    case Channel::stdin_:
      return stdin_;
  }
  return shell_;
}

std::optional<std::vector<std::string>> Transport::receive(Channel channel) {
  auto& sock = socket(channel);
  std::vector<std::string> frames;
  zmq::message_t part;
  if (!sock.recv(part, zmq::recv_flags::dontwait)) return std::nullopt;
  frames.emplace_back(part.to_string());
  // The remaining parts of a multipart message are already here (ZMQ delivers it whole).
  while (part.more() && frames.size() < 4096) {
    if (!sock.recv(part, zmq::recv_flags::none)) break;
    frames.emplace_back(part.to_string());
  }
  while (part.more()) (void)sock.recv(part, zmq::recv_flags::none);  // discard an absurd tail
  return frames;
}

void Transport::send_on(zmq::socket_t& socket, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    // ROUTER drops unroutable messages; PUB drops past its high-water mark: never blocks.
    (void)socket.send(zmq::buffer(frames[i]), flags | zmq::send_flags::dontwait);
  }
}

void Transport::send(Channel channel, const std::vector<std::string>& frames) {
  send_on(socket(channel), frames);
}

void Transport::publish(const std::vector<std::string>& frames) {
  send_on(iopub_, frames);
}

}  // namespace belljar
