#include "kernel/protocol/transport.hpp"

#include <cerrno>

#include "sandbox/os/host_port.hpp"
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
// Binds `port` as given, or (port 0) one of `range`'s, and writes back the port bound.
void bind_socket(zmq::socket_t& socket, const ConnectionInfo& info, int& port,
                 const PortRange& range, const char* channel) {
  socket.set(zmq::sockopt::linger, 1000);  // let the last replies out at shutdown
  // Before bind: the limit is copied into each connection as it is accepted.
  socket.set(zmq::sockopt::maxmsgsize, kMaxClientMessage);
  auto bind = [&](int candidate) {
    std::string endpoint = candidate == 0 && info.transport == "tcp"
                               ? "tcp://" + bracketed_host(info.ip) + ":*"
                               : info.endpoint(candidate);
    try {
      socket.bind(endpoint);
    } catch (const zmq::error_t& e) {
      if (e.num() == EADDRINUSE && port == 0) return false;  // another port of the range
      throw UsageError("cannot bind " + endpoint + ": " + e.what());
    }
    if (candidate == 0) {
      std::string bound = socket.get(zmq::sockopt::last_endpoint);
      candidate = std::stoi(bound.substr(bound.rfind(':') + 1));
    }
    port = candidate;
    return true;
  };
  if (port != 0) {
    bind(port);
    return;
  }
  bind_in_range(range, bind, std::string("the ") + channel + " channel");
}
}  // namespace

Transport::Transport(ConnectionInfo& info, const PortRange& range)
    : context_(1),
      shell_(context_, zmq::socket_type::router),
      control_(context_, zmq::socket_type::router),
      stdin_(context_, zmq::socket_type::router),
      iopub_(context_, zmq::socket_type::pub),
      heartbeat_(context_, zmq::socket_type::router) {
  bind_socket(shell_, info, info.shell_port, range, "shell");
  bind_socket(control_, info, info.control_port, range, "control");
  bind_socket(stdin_, info, info.stdin_port, range, "stdin");
  bind_socket(iopub_, info, info.iopub_port, range, "iopub");
  bind_socket(heartbeat_, info, info.hb_port, range, "heartbeat");
  heartbeat_.set(zmq::sockopt::linger, 0);
  zmq::socket_t* sockets[] = {&shell_, &control_, &stdin_, &iopub_, &heartbeat_};
  for (size_t i = 0; i < 5; ++i) {
    // Unique per Transport: a process may hold more than one (the tests do).
    std::string endpoint = "inproc://belljar-monitor-" +
                           std::to_string(reinterpret_cast<uintptr_t>(this)) + "-" + kMonitored[i];
    if (zmq_socket_monitor(sockets[i]->handle(), endpoint.c_str(), ZMQ_EVENT_DISCONNECTED) != 0)
      throw zmq::error_t();
    monitors_[i] = zmq::socket_t(context_, zmq::socket_type::pair);
    monitors_[i].set(zmq::sockopt::linger, 0);
    monitors_[i].connect(endpoint);
  }
  heartbeat_thread_ = std::thread([this] {
    try {
      zmq_proxy(heartbeat_.handle(), heartbeat_.handle(), nullptr);  // echo each ping back
    } catch (const zmq::error_t&) {
      // ETERM: the context is closing.
    }
  });
}

Transport::~Transport() {
  for (auto& monitor : monitors_) monitor.close();
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
  // The remaining parts of a multipart message are already here (ZMQ delivers it whole). Past
  // 4096 parts or kMaxClientMessage bytes in all, nothing more is copied: the message is
  // dropped (returned empty) and its parts freed as they are read.
  constexpr auto kMaxTotal = static_cast<size_t>(kMaxClientMessage);
  size_t total = part.size();
  while (part.more() && frames.size() < 4096 && total <= kMaxTotal) {
    if (!sock.recv(part, zmq::recv_flags::none)) break;
    total += part.size();
    if (total <= kMaxTotal) frames.emplace_back(part.to_string());
  }
  while (part.more()) (void)sock.recv(part, zmq::recv_flags::none);  // discard an absurd tail
  if (total > kMaxTotal) frames.clear();
  return frames;
}

void Transport::add_monitor_items(std::vector<zmq::pollitem_t>& items) {
  for (auto& monitor : monitors_) items.push_back({monitor.handle(), 0, ZMQ_POLLIN, 0});
}

std::vector<std::string> Transport::disconnects(const zmq::pollitem_t* items) {
  std::vector<std::string> channels;
  for (size_t i = 0; i < 5; ++i) {
    if (!(items[i].revents & ZMQ_POLLIN)) continue;
    // Each event is two parts: the event and its value, then the endpoint.
    for (int events = 0; events < 64; ++events) {
      zmq::message_t part;
      if (!monitors_[i].recv(part, zmq::recv_flags::dontwait)) break;
      while (part.more() && monitors_[i].recv(part, zmq::recv_flags::dontwait)) {
      }
      channels.emplace_back(kMonitored[i]);
    }
  }
  return channels;
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
