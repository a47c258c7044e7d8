#pragma once
// Helpers for the egress proxy's tests: loopback listeners, blocking reads with deadlines, and
// small upstream servers that stand for the outside world.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sandbox/os/fd.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar::testing {

using namespace std::chrono_literals;

inline HostRule rule(const std::string& text, bool local = false) {
  HostRule r = parse_host_rule("--allow-net", text);
  r.local = local;
  return r;
}

inline Fd listen_loopback(uint16_t& port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) == 0);
  REQUIRE(::listen(fd.get(), 128) == 0);
  socklen_t len = sizeof sin;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sin), &len);
  port = ntohs(sin.sin_port);
  return fd;
}

inline bool readable(int fd, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(wait.count())) > 0;
}

// Reads until EOF (or the deadline); what arrived.
inline std::string read_all(int fd, std::chrono::milliseconds wait = 5000ms) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + wait;
  char buf[65536];
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!readable(fd, left)) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

inline void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    REQUIRE(n > 0);
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// For the servers' threads: Catch2's assertions belong to the test's thread only.
inline bool send_quietly(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Small upstream servers, one thread per connection, by path:
//   /hello      200 "hello" with Connection: keep-alive
//   /echo-head  200 with the request head it received as the body
//   /stall      never answers (until the connection closes)
//   /big        200 with 4 MiB of 'x'
// On the echo port, bytes come back as they are (for CONNECT).
class Upstream {
 public:
  explicit Upstream(bool echo = false) : echo_(echo) {
    listener_ = listen_loopback(port_);
    thread_ = std::thread([this] { serve(); });
  }
  ~Upstream() {
    stop_ = true;
    thread_.join();
    for (auto& t : workers_) t.join();
  }
  uint16_t port() const { return port_; }
  int closed_connections() const { return closed_; }
  int accepted() const { return accepted_; }
  // Whether `n` connections were accepted (have ended) by then: the events a test waits for.
  bool accepted_at_least(int n, std::chrono::milliseconds wait = 5000ms) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, wait, [&] { return accepted_ >= n; });
  }
  bool closed_at_least(int n, std::chrono::milliseconds wait = 5000ms) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, wait, [&] { return closed_ >= n; });
  }

 private:
  void serve() {
    while (!stop_) {
      if (!readable(listener_.get(), 50ms)) continue;  // and look at stop_ again
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard lock(mutex_);
      ++accepted_;
      workers_.emplace_back([this, fd] { handle(Fd(fd)); });
      changed_.notify_all();
    }
  }
  void handle(Fd fd) {
    std::string got;
    char buf[65536];
    while (!stop_) {
      if (!readable(fd.get(), 50ms)) continue;
      ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
      if (n <= 0) break;
      if (echo_) {
        if (!send_quietly(fd.get(), std::string_view(buf, static_cast<size_t>(n)))) break;
        continue;
      }
      got.append(buf, static_cast<size_t>(n));
      auto end = got.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      std::string head = got.substr(0, end + 4);
      std::string path = head.substr(head.find(' ') + 1);
      path = path.substr(0, path.find(' '));
      std::string body;
      if (path == "/hello")
        body = "hello";
      else if (path == "/echo-head")
        body = head;
      else if (path == "/big")
        body = std::string(4 << 20, 'x');
      else if (path == "/stall")
        continue;
      if (!send_quietly(fd.get(),
                        "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                            "\r\nConnection: keep-alive\r\n\r\n" + body))
        break;
      // Like real servers, it honours the proxy's "Connection: close" (after saying keep-alive,
      // so the test sees the proxy rewrite that).
      if (head.find("Connection: close\r\n") != std::string::npos) break;
      got.clear();
    }
    fd.reset();  // ended for the proxy before it counts as closed
    std::lock_guard lock(mutex_);
    ++closed_;
    changed_.notify_all();
  }
  bool echo_;
  uint16_t port_ = 0;
  Fd listener_;
  std::atomic<bool> stop_{false};
  std::atomic<int> closed_{0}, accepted_{0};
  std::mutex mutex_;  // guards workers_, and the counts' changes for changed_
  std::condition_variable changed_;
  std::vector<std::thread> workers_;
  std::thread thread_;
};

inline std::string status_line(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

inline std::string body_of(const std::string& response) {
  auto end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

}  // namespace belljar::testing
