// The jail init's forwarder outside a jail: it listens on a loopback port, passes connections
// over a SOCK_SEQPACKET pair to a real proxy, and must neither drop a burst nor block when the
// proxy is slow (the channel full) or gone.
#include "sandbox/jail/egress_forwarder.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "egress_harness.hpp"
#include "sandbox/egress/egress_proxy.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

uint16_t free_port() {
  uint16_t port = 0;
  listen_loopback(port);
  return port;
}

// init's loop, on a thread of its own: poll, then hand the results back. Each pass ends with
// the forwarder's state settled, and says so to whoever waits for one.
class InitLoop {
 public:
  explicit InitLoop(EgressForwarder& forwarder)
      : forwarder_(forwarder), thread_([this] { run(); }) {}
  ~InitLoop() {
    stop_ = true;
    thread_.join();
  }
  size_t max_pending() const { return max_pending_; }
  // Whether connections were ever held back in init's queue, by `wait`.
  bool queued(std::chrono::milliseconds wait = 10000ms) {
    std::unique_lock lock(mutex_);
    return passed_.wait_for(lock, wait, [&] { return max_pending_ > 0; });
  }
  // Returns once the pass under way when called (if any) is over: whatever on_ready was doing
  // then is done.
  void next_pass() {
    std::unique_lock lock(mutex_);
    uint64_t now = passes_;
    passed_.wait(lock, [&] { return passes_ > now; });
  }

 private:
  void run() {
    while (!stop_) {
      std::vector<pollfd> fds;
      forwarder_.poll_set(fds);
      ::poll(fds.data(), fds.size(), 20);  // and look at stop_ again
      forwarder_.on_ready(fds.data());
      std::lock_guard lock(mutex_);
      max_pending_ = std::max(max_pending_.load(), forwarder_.pending());
      ++passes_;
      passed_.notify_all();
    }
  }
  EgressForwarder& forwarder_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> max_pending_{0};
  std::mutex mutex_;  // guards passes_, and max_pending_'s changes for passed_
  std::condition_variable passed_;
  uint64_t passes_ = 0;
  std::thread thread_;
};

Fd connect_to(uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sin.sin_port = htons(port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) return Fd();
  return fd;
}

std::string quiet_request(uint16_t port, const std::string& head) {
  Fd fd = connect_to(port);
  if (!fd) return "connect failed";
  if (!send_quietly(fd.get(), head)) return "send failed";
  return read_all(fd.get(), 20000ms);
}

}  // namespace

TEST_CASE("the forwarder passes a burst of a hundred connections through a small queue",
          "[egress]") {
  Upstream up;
  std::string target = "127.0.0.1:" + std::to_string(up.port());
  int sp[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
  uint16_t port = free_port();
  EgressForwarder forwarder(port, Fd(sp[0]));
  EgressProxy proxy({rule(target)});
  proxy.attach(Fd(sp[1]));
  InitLoop init(forwarder);
  std::vector<std::future<std::string>> replies;
  for (int i = 0; i < 100; ++i)
    replies.push_back(std::async(std::launch::async, quiet_request, port,
                                 "GET http://" + target + "/hello HTTP/1.1\r\n\r\n"));
  int ok = 0;
  for (auto& reply : replies) ok += body_of(reply.get()) == "hello";
  CHECK(ok == 100);
}

TEST_CASE("the forwarder holds connections while the proxy does not read, then passes them",
          "[egress]") {
  Upstream up;
  std::string target = "127.0.0.1:" + std::to_string(up.port());
  int sp[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
  Fd proxy_end(sp[1]);
  int tiny = 1;  // the kernel's minimum: only a few descriptors fit in flight
  ::setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &tiny, sizeof tiny);
  uint16_t port = free_port();
  EgressForwarder forwarder(port, Fd(sp[0]));
  InitLoop init(forwarder);
  std::vector<std::future<std::string>> replies;
  for (int i = 0; i < 40; ++i)
    replies.push_back(std::async(std::launch::async, quiet_request, port,
                                 "GET http://" + target + "/hello HTTP/1.1\r\n\r\n"));
  CHECK(init.queued());  // the channel filled up; init kept the rest, unblocked
  EgressProxy proxy({rule(target)});
  proxy.attach(std::move(proxy_end));
  int ok = 0;
  for (auto& reply : replies) ok += body_of(reply.get()) == "hello";
  CHECK(ok == 40);
}

TEST_CASE("when the proxy is gone the forwarder closes its port", "[egress]") {
  int sp[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
  uint16_t port = free_port();
  EgressForwarder forwarder(port, Fd(sp[0]));
  ::close(sp[1]);
  InitLoop init(forwarder);
  Fd first = connect_to(port);  // in the backlog: accepted, then the send fails
  REQUIRE(first);
  CHECK(read_all(first.get(), 3000ms).empty());
  // Its end came from the pass that found the proxy gone, which closes the port as it goes on.
  init.next_pass();
  CHECK_FALSE(connect_to(port));
}

TEST_CASE("the forwarder needs its port: one that is taken is a setup error", "[egress]") {
  uint16_t port = 0;
  Fd taken = listen_loopback(port);
  int sp[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
  Fd other(sp[1]);
  CHECK_THROWS_WITH(EgressForwarder(port, Fd(sp[0])),
                    Catch::Contains("listen(127.0.0.1:" + std::to_string(port)));
}
