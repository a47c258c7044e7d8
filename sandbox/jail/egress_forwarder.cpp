#include "sandbox/jail/egress_forwarder.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "sandbox/os/fd_passing.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

// No SO_REUSEPORT, ever: the worker has our uid inside, and a second socket with it could
// share the port and take connections meant for the proxy. Without it, its bind() fails.
Fd listen_on(int family, uint16_t port) {
  Fd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return fd;
  sockaddr_storage storage{};
  socklen_t length;
  if (family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&storage);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    length = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&storage);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    sin6->sin6_addr = in6addr_loopback;
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    length = sizeof(sockaddr_in6);
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&storage), length) != 0 ||
      ::listen(fd.get(), 128) != 0)
    return Fd();
  return fd;
}

}  // namespace

EgressForwarder::EgressForwarder(uint16_t port, Fd channel) : channel_(std::move(channel)) {
  ::fcntl(channel_.get(), F_SETFD, FD_CLOEXEC);  // never into the worker
  Fd v4 = listen_on(AF_INET, port);
  if (!v4) throw_errno("listen(127.0.0.1:" + std::to_string(port) + ") for the egress proxy");
  listeners_.push_back(std::move(v4));
  listeners_.push_back(listen_on(AF_INET6, port));  // may be invalid: polled as -1
}

void EgressForwarder::poll_set(std::vector<pollfd>& fds) const {
  bool room = pending_.size() < kMaxPending;
  for (const auto& listener : listeners_) fds.push_back({room ? listener.get() : -1, POLLIN, 0});
  // Polled only with something to send: a closed peer would otherwise wake us forever.
  fds.push_back({pending_.empty() ? -1 : channel_.get(), POLLOUT, 0});
}

void EgressForwarder::on_ready(const pollfd* fds) {
  for (size_t i = 0; i < listeners_.size(); ++i)
    if (fds[i].fd >= 0 && (fds[i].revents & POLLIN)) accept_from(listeners_[i].get());
  flush();
}

void EgressForwarder::accept_from(int listener) {
  while (listener >= 0 && pending_.size() < kMaxPending) {
    Fd client(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!client) return;  // EAGAIN, or a connection that went away before we took it
    pending_.push_back(std::move(client));
  }
}

void EgressForwarder::flush() {
  while (!pending_.empty()) {
    int error = send_fd(channel_.get(), pending_.front().get());
    if (error == EAGAIN) return;  // the proxy is behind: POLLOUT brings us back
    if (error == 0 || error == ETOOMANYREFS || error == ENOBUFS || error == ENOMEM) {
      pending_.pop_front();  // passed (or, when the kernel won't carry it, dropped)
      continue;
    }
    close_all();  // EPIPE, ECONNREFUSED...: the supervisor's end is gone
    return;
  }
}

void EgressForwarder::close_all() {
  pending_.clear();
  for (auto& listener : listeners_) listener.reset();  // from now on, connects are refused
  channel_.reset();
}

}  // namespace belljar
