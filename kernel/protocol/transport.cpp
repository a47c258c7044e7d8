#include "kernel/protocol/transport.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

#include "sandbox/os/host_port.hpp"
#include "sandbox/os/usage_error.hpp"

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
// Not a rule for the peers' messages (the gate's meter is), a second fence: libzmq also refuses
// a part over kMaxClientMessage. Before bind, so that each connection it accepts carries it.
void limit_socket(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::linger, 1000);  // let the last replies out at shutdown
  socket.set(zmq::sockopt::maxmsgsize, kMaxClientMessage);
  // Only this process (the gate) may connect to the socket behind a door.
  pid_t self = ::getpid();
  if (zmq_setsockopt(socket.handle(), ZMQ_IPC_FILTER_PID, &self, sizeof self) != 0)
    throw std::runtime_error(std::string("ZMQ_IPC_FILTER_PID: ") + zmq_strerror(zmq_errno()));
}

// A listening socket for a client's endpoint, non-blocking; empty (errno EADDRINUSE) when the
// port is taken. An ipc endpoint is a unix socket at "IP-PORT", as Jupyter names them.
Fd listen_at(const ConnectionInfo& info, int port) {
  if (info.transport == "ipc") {
    std::string path = info.ip + "-" + std::to_string(port);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.size() >= sizeof address.sun_path)
      throw UsageError("cannot listen on " + path + ": the path is too long for a unix socket");
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    ::unlink(path.c_str());  // a socket left by an earlier kernel, as libzmq does
    if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd.get(), 128) != 0)
      throw UsageError("cannot listen on " + path + ": " + std::strerror(errno));
    return fd;
  }
  std::string host = info.ip.empty() || info.ip == "*" ? "0.0.0.0" : info.ip;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  // As libzmq without ZMQ_IPV6: a name ("localhost") is its IPv4 address; a literal is itself.
  hints.ai_family = host.find(':') == std::string::npos ? AF_INET : AF_INET6;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int e = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); e != 0)
    throw UsageError("cannot listen on " + host + ": " + ::gai_strerror(e));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, ::freeaddrinfo);
  Fd fd(::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int one = 1;
  if (!fd || ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
    throw UsageError("cannot listen on " + host + ": " + std::strerror(errno));
  if (::bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0) {
    if (errno == EADDRINUSE) return {};
    throw UsageError("cannot listen on " + host_port(host, static_cast<uint16_t>(port)) + ": " +
                     std::strerror(errno));
  }
  if (::listen(fd.get(), 128) != 0)
    throw UsageError("cannot listen on " + host + ": " + std::strerror(errno));
  return fd;
}

int bound_port(const Fd& listener) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw std::runtime_error(std::string("getsockname: ") + std::strerror(errno));
  return address.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

// How long a port the connection file names is tried again while another socket holds it.
// jupyter_client picks a kernel's ports by binding and closing probe sockets; a manager in
// another process (a process pool's) may hold one of them in its own probe just as this kernel,
// far quicker to start than ipykernel, binds it. A port held for good still fails, a moment later.
constexpr auto kBusyPortPatience = std::chrono::seconds(1);
constexpr auto kBusyPortRetry = std::chrono::milliseconds(10);

// Listens at `port` as given, or (port 0) at one of `range`'s, and writes back the port.
Fd open_door(const ConnectionInfo& info, int& port, const PortRange& range, const char* channel) {
  Fd listener;
  auto bind = [&](int candidate) {
    Fd fd = listen_at(info, candidate);
    if (!fd) return false;
    port = candidate == 0 && info.transport == "tcp" ? bound_port(fd) : candidate;
    listener = std::move(fd);
    return true;
  };
  if (port == 0) {
    bind_in_range(range, bind, std::string("the ") + channel + " channel");
    return listener;
  }
  auto give_up = std::chrono::steady_clock::now() + kBusyPortPatience;
  bool told = false;
  while (!bind(port)) {
    if (std::chrono::steady_clock::now() >= give_up)
      throw UsageError("cannot listen on " + info.endpoint(port) + ": " +
                       std::strerror(EADDRINUSE));
    if (!told) {
      std::fprintf(stderr, "belljar: %s is in use; trying it again for up to 1 s\n",
                   info.endpoint(port).c_str());
      told = true;
    }
    std::this_thread::sleep_for(kBusyPortRetry);
  }
  return listener;
}

// A private directory (0700) for the sockets behind the doors.
std::string private_directory() {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp && tmp[0] == '/' && std::strlen(tmp) < 60 ? tmp : "/tmp";
  std::string name = base + "/belljar-doors-XXXXXX";
  if (!::mkdtemp(name.data()))
    throw std::runtime_error("mkdtemp(" + name + "): " + std::strerror(errno));
  return name;
}
}  // namespace

Transport::Transport(ConnectionInfo& info, const PortRange& range)
    : gate_({{static_cast<uint64_t>(kMaxClientMessage)},
             kGateBudget,
             kMaxConnections,
             kMaxPerAddress,
             kHandshakeBound,
             kUnauthenticatedBound}),
      context_(1),
      shell_(context_, zmq::socket_type::router),
      control_(context_, zmq::socket_type::router),
      stdin_(context_, zmq::socket_type::router),
      iopub_(context_, zmq::socket_type::pub),
      heartbeat_(context_, zmq::socket_type::router),
      private_dir_(private_directory()) {
  zmq::socket_t* sockets[] = {&shell_, &control_, &stdin_, &iopub_, &heartbeat_};
  int* ports[] = {&info.shell_port, &info.control_port, &info.stdin_port, &info.iopub_port,
                  &info.hb_port};
  try {
    for (size_t i = 0; i < 5; ++i) {
      limit_socket(*sockets[i]);
      std::string inner = private_dir_ + "/" + kMonitored[i];
      sockets[i]->bind("ipc://" + inner);
      Fd door = open_door(info, *ports[i], range, kMonitored[i]);
      if (info.transport == "ipc") public_paths_.push_back(info.endpoint(*ports[i]).substr(6));
      gate_.add_door(std::move(door), inner, kMonitored[i]);
    }
  } catch (...) {
    remove_files();
    throw;
  }
  heartbeat_.set(zmq::sockopt::linger, 0);
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
  gate_.start();
  heartbeat_thread_ = std::thread([this] {
    try {
      zmq_proxy(heartbeat_.handle(), heartbeat_.handle(), nullptr);  // echo each ping back
    } catch (const zmq::error_t&) {
      // ETERM: the context is closing.
    }
  });
}

void Transport::remove_files() {
  for (const char* name : kMonitored) ::unlink((private_dir_ + "/" + name).c_str());
  ::rmdir(private_dir_.c_str());
  for (const auto& path : public_paths_) ::unlink(path.c_str());
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
  remove_files();
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
      if (!gate_.take_quiet_close(kMonitored[i])) channels.emplace_back(kMonitored[i]);
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
