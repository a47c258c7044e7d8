#include "kernel/launch/comm_port.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "kernel/protocol/bounded_json.hpp"
#include "sandbox/os/host_port.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

GatewayAction action_for_signal(int signum) {
  switch (signum) {
    case SIGINT:
      return GatewayAction::interrupt;
    case SIGHUP:
    case SIGQUIT:
    case SIGABRT:
    case SIGKILL:
    case SIGUSR1:
    case SIGUSR2:
    case SIGALRM:
    case SIGTERM:
      return GatewayAction::shutdown;
    default:  // 0 (is it alive?), and signals a process ignores or stops on by default
      return GatewayAction::none;
  }
}

GatewayAction parse_gateway_request(const std::string& body, std::string* why) {
  std::string parse_error;
  auto request = parse_bounded_json(body, &parse_error);
  if (!request || !request->is_object()) {
    *why = "not a JSON object";
    return GatewayAction::none;
  }
  auto signum = request->find("signum");
  auto shutdown = request->find("shutdown");
  if (signum == request->end() && shutdown == request->end()) {
    *why = "neither \"signum\" nor \"shutdown\"";
    return GatewayAction::none;
  }
  GatewayAction action = GatewayAction::none;
  if (signum != request->end()) {
    // The gateway's listeners take int(signum): a number, or its digits as a string.
    long long number = -1;
    if (signum->is_number_integer()) number = signum->get<long long>();
    if (signum->is_string()) {
      const std::string& digits = signum->get_ref<const std::string&>();
      if (!digits.empty() && digits.size() <= 2 &&
          digits.find_first_not_of("0123456789") == std::string::npos)
        number = std::stoll(digits);
    }
    if (number < 0 || number > SIGRTMAX) {
      *why = "\"signum\" is not a signal number";
      return GatewayAction::none;
    }
    action = action_for_signal(static_cast<int>(number));
  }
  if (shutdown != request->end()) {
    bool asked = (shutdown->is_boolean() && shutdown->get<bool>()) ||
                 (shutdown->is_number() && shutdown->get<double>() != 0);
    if (!shutdown->is_boolean() && !shutdown->is_number()) {
      *why = "\"shutdown\" is not a number or a boolean";
      return GatewayAction::none;
    }
    if (asked) action = GatewayAction::shutdown;
  }
  return action;
}

CommPort::CommPort(const std::string& ip, const PortRange& range) {
  sockaddr_storage address{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    length = sizeof *v4;
  } else if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    length = sizeof *v6;
  } else {
    throw UsageError("--ip " + ip + ": not an IP address");
  }
  bind_in_range(
      range,
      [&](uint16_t candidate) {
        Fd sock(::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!sock) throw UsageError(std::string("comm port: socket: ") + std::strerror(errno));
        int one = 1;
        ::setsockopt(sock.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (address.ss_family == AF_INET)
          v4->sin_port = htons(candidate);
        else
          v6->sin6_port = htons(candidate);
        if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&address), length) != 0) {
          if (errno == EADDRINUSE && candidate != 0) return false;
          throw UsageError("comm port: bind(" + host_port(ip, candidate) +
                           "): " + std::strerror(errno));
        }
        if (::listen(sock.get(), 16) != 0)
          throw UsageError(std::string("comm port: listen: ") + std::strerror(errno));
        sockaddr_storage bound{};
        socklen_t bound_length = sizeof bound;
        ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&bound), &bound_length);
        port_ =
            ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                             : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
        listener_ = std::move(sock);
        return true;
      },
      "the comm port");
}

void CommPort::add_poll_items(std::vector<zmq::pollitem_t>& items) const {
  items.push_back({nullptr, listener_.get(), ZMQ_POLLIN, 0});
  // A fixed number of slots, so the caller can count them; a free slot polls nothing (-1).
  for (size_t i = 0; i < kMaxConnections; ++i)
    items.push_back(
        {nullptr, i < connections_.size() ? connections_[i].fd.get() : -1, ZMQ_POLLIN, 0});
}

std::vector<GatewayAction> CommPort::handle(const zmq::pollitem_t* items) {
  std::vector<GatewayAction> actions;
  auto now = std::chrono::steady_clock::now();
  std::vector<Connection> open;
  for (size_t i = 0; i < connections_.size(); ++i) {
    Connection& connection = connections_[i];
    bool keep = true;
    if (items[1 + i].revents & (ZMQ_POLLIN | ZMQ_POLLERR)) keep = read_from(connection, actions);
    if (keep && now >= connection.deadline) {
      log_.log("comm port", "a request not finished within 5 s was dropped");
      keep = false;
    }
    if (keep) open.push_back(std::move(connection));
  }
  connections_ = std::move(open);
  if (items[0].revents & ZMQ_POLLIN) accept_connections();
  return actions;
}

std::optional<std::chrono::steady_clock::time_point> CommPort::next_deadline() const {
  std::optional<std::chrono::steady_clock::time_point> next;
  for (auto& connection : connections_)
    if (!next || connection.deadline < *next) next = connection.deadline;
  return next;
}

void CommPort::accept_connections() {
  for (;;) {
    Fd peer(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!peer) return;  // EAGAIN: none left (or a peer that already went)
    if (connections_.size() >= kMaxConnections) {
      log_.log("comm port", "more than 16 requests at once: one was refused");
      continue;  // closed as it goes out of scope
    }
    connections_.push_back(
        {std::move(peer), {}, std::chrono::steady_clock::now() + kRequestTimeout});
  }
}

bool CommPort::read_from(Connection& connection, std::vector<GatewayAction>& actions) {
  char chunk[1024];
  for (;;) {
    ssize_t n = ::recv(connection.fd.get(), chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0) return false;
    if (n == 0) break;  // the gateway closes once it has sent its request
    if (connection.body.size() + static_cast<size_t>(n) > kMaxRequestBytes) {
      log_.log("comm port", "a request over 4 KiB was dropped");
      return false;
    }
    connection.body.append(chunk, static_cast<size_t>(n));
  }
  if (connection.body.empty()) return false;  // a TCP probe (a pod's liveness check)
  std::string why;
  GatewayAction action = parse_gateway_request(connection.body, &why);
  if (!why.empty())
    log_.log("comm port", "a malformed request was ignored: " + why);
  else
    actions.push_back(action);
  return false;
}

}  // namespace belljar
