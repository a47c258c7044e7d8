#include "kernel/launch/response_address.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

#include "sandbox/os/fd.hpp"
#include "sandbox/os/host_port.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

std::string ResponseAddress::text() const {
  return host_port(host, port);
}

ResponseAddress parse_response_address(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return UsageError("--response-address " + text + ": " + why);
  };
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) throw bad("expected IP:PORT");
  ResponseAddress address;
  address.host = text.substr(0, colon);
  if (address.host.front() == '[') {
    if (address.host.size() < 3 || address.host.back() != ']') throw bad("expected [IPv6]:PORT");
    address.host = address.host.substr(1, address.host.size() - 2);
  } else if (address.host.find(':') != std::string::npos) {
    throw bad("an IPv6 address goes in brackets: [IPv6]:PORT");
  }
  std::string_view port = std::string_view(text).substr(colon + 1);
  unsigned value = 0;
  auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || error != std::errc() || end != port.data() + port.size() || value == 0 ||
      value > 65535)
    throw bad("the port must be a number from 1 to 65535");
  address.port = static_cast<uint16_t>(value);
  return address;
}

namespace {
// One attempt: connect within the timeout, send everything, close. "" on success, else why.
std::string try_send(const ResponseAddress& address, const std::string& payload,
                     std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port = std::to_string(address.port);
  if (int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return std::string("cannot resolve it: ") + ::gai_strerror(rc);
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, ::freeaddrinfo);
  std::string why = "no address";
  for (addrinfo* ai = found; ai; ai = ai->ai_next) {
    Fd sock(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!sock) {
      why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    if (::connect(sock.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = std::string("connect: ") + std::strerror(errno);
      continue;
    }
    auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t sent = 0;
    bool connected = false;
    while (sent < payload.size()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{sock.get(), POLLOUT, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
        why = connected ? "timed out sending" : "timed out connecting";
        break;
      }
      if (!connected) {
        int error = 0;
        socklen_t len = sizeof error;
        ::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &error, &len);
        if (error != 0) {
          why = std::string("connect: ") + std::strerror(error);
          break;
        }
        connected = true;
      }
      ssize_t n = ::send(sock.get(), payload.data() + sent, payload.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n < 0) {
        why = std::string("send: ") + std::strerror(errno);
        break;
      }
      sent += static_cast<size_t>(n);
    }
    if (sent == payload.size()) {
      ::shutdown(sock.get(), SHUT_WR);  // the gateway reads to the end of the stream
      return "";
    }
  }
  return why;
}
}  // namespace

void send_to_response_address(const ResponseAddress& address, const std::string& payload,
                              const SendPolicy& policy) {
  auto wait = policy.first_wait;
  std::string why;
  for (int attempt = 1; attempt <= policy.attempts; ++attempt) {
    why = try_send(address, payload, policy.connect_timeout);
    if (why.empty()) return;
    if (attempt < policy.attempts) {
      std::this_thread::sleep_for(wait);
      wait *= 2;
    }
  }
  throw std::runtime_error("--response-address " + address.text() + ": " + why + " (" +
                           std::to_string(policy.attempts) + " attempts)");
}

}  // namespace belljar
