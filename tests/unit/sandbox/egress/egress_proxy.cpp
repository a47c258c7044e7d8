// The egress proxy end to end, without a sandbox: connections reach it the way the jail's
// init hands them over (a TCP socket passed over a SOCK_SEQPACKET pair), upstreams are small
// servers on 127.0.0.1, and a fake resolver maps test names to the addresses a test needs.
#include "sandbox/egress/egress_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "egress_harness.hpp"
#include "sandbox/os/fd_passing.hpp"

using namespace belljar;
using namespace belljar::testing;
using namespace std::chrono_literals;

namespace {

// A gate the fake resolver may wait at: its answer then comes only once the test opens it.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    opened_cv_.wait(lock, [&] { return opened_; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    opened_ = true;
    opened_cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_cv_;
  bool opened_ = false;
};

enum class Answers { at_once, when_released };

// The proxy, fed the way init feeds it; connect() gives a client socket.
class Harness {
 public:
  explicit Harness(std::vector<HostRule> rules, EgressLimits limits = {},
                   std::map<std::string, std::vector<std::string>> names = {},
                   Answers answers = Answers::at_once)
      : proxy_(std::move(rules), limits,
               [names, count = resolved_,
                gate = answers == Answers::at_once ? nullptr : gate_](const std::string& name) {
                 ++*count;
                 if (gate) gate->wait();
                 Resolution r;
                 auto it = names.find(name);
                 if (it == names.end()) {
                   r.error = "Name or service not known";
                   return r;
                 }
                 for (const auto& text : it->second) r.addresses.push_back(*IpAddress::parse(text));
                 return r;
               }) {
    int sp[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    init_end_.reset(sp[0]);
    proxy_.attach(Fd(sp[1]));
    sandbox_listener_ = listen_loopback(sandbox_port_);
  }
  ~Harness() { release_resolver(); }  // before the proxy waits for its resolver threads

  void release_resolver() { gate_->open(); }

  Fd connect() {
    Fd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons(sandbox_port_);
    REQUIRE(::connect(client.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) == 0);
    Fd accepted(::accept4(sandbox_listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    REQUIRE(accepted);
    REQUIRE(send_fd(init_end_.get(), accepted.get()) == 0);
    return client;  // `accepted` closes here, as init closes its copy
  }

  std::string request(const std::string& head) {
    Fd client = connect();
    send_all(client.get(), head);
    return read_all(client.get());
  }

  std::vector<EgressDecision> decisions(size_t at_least = 1) {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (collected_.size() < at_least && std::chrono::steady_clock::now() < deadline) {
      readable(proxy_.decisions_fd(), 100ms);
      for (auto& d : proxy_.take_decisions().items) collected_.push_back(d);
    }
    return collected_;
  }

  // Whether the proxy's count of connections falls to 0. It drops on the proxy's thread just
  // after a connection's sockets close, and nothing says when: this looks until it has.
  bool settles(std::chrono::milliseconds wait = 3000ms) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    while (proxy_.open_connections() != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    return proxy_.open_connections() == 0;
  }

  EgressProxy& proxy() { return proxy_; }
  int resolved() const { return *resolved_; }
  void close_channel() { init_end_.reset(); }

 private:
  // Shared with the resolver's threads, which may outlive the harness by a moment.
  std::shared_ptr<std::atomic<int>> resolved_ = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  EgressProxy proxy_;
  Fd init_end_;
  Fd sandbox_listener_;
  uint16_t sandbox_port_ = 0;
  std::vector<EgressDecision> collected_;
};

// Whether `fd` reports `condition` (POLLERR, POLLHUP: reported unasked) within `wait`.
bool reports(int fd, short condition, std::chrono::milliseconds wait = 5000ms) {
  pollfd p{fd, 0, 0};
  return ::poll(&p, 1, static_cast<int>(wait.count())) > 0 && (p.revents & condition);
}

size_t open_fds() {
  size_t n = 0;
  for (auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) (void)entry, ++n;
  return n;
}

}  // namespace

TEST_CASE("an allowlisted address is proxied, its heads rewritten for one request", "[egress]") {
  Upstream up;
  std::string target = "127.0.0.1:" + std::to_string(up.port());
  Harness h({rule(target)});
  std::string response =
      h.request("GET http://" + target + "/echo-head HTTP/1.1\r\nHost: " + target +
                "\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n\r\n");
  CHECK(status_line(response) == "HTTP/1.1 200 OK");
  CHECK(response.find("Connection: close\r\n") != std::string::npos);
  CHECK(response.find("keep-alive") == std::string::npos);
  std::string seen = body_of(response);
  CHECK(seen.rfind("GET /echo-head HTTP/1.1\r\n", 0) == 0);
  CHECK(seen.find("Proxy-Connection") == std::string::npos);
  CHECK(seen.find("Connection: close\r\n") != std::string::npos);
  auto d = h.decisions();
  REQUIRE(d.size() == 1);
  CHECK(d[0].decision == "allowed");
  CHECK(d[0].method == "GET");
  CHECK(d[0].host == "127.0.0.1");
  CHECK(d[0].port == up.port());
  CHECK(d[0].rule == "--allow-net " + target);
  CHECK(d[0].address == "127.0.0.1");
  CHECK(h.resolved() == 0);  // a literal address is never looked up
  CHECK(h.settles());
}

TEST_CASE("a host not on the allowlist gets 403 naming it, without being resolved", "[egress]") {
  Harness h({rule("pypi.org")}, {}, {{"example.com", {"93.184.216.34"}}});
  std::string response = h.request("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n");
  CHECK(status_line(response) == "HTTP/1.1 403 Forbidden");
  CHECK(response.find("X-Belljar-Denied: not-allowlisted\r\n") != std::string::npos);
  CHECK(body_of(response) ==
        "belljar: egress to example.com:80 refused: example.com is not on this kernel's allowlist "
        "(--allow-net)\n");
  auto d = h.decisions();
  REQUIRE(d.size() == 1);
  CHECK(d[0].decision == "denied");
  CHECK(d[0].reason == "not-allowlisted");
  CHECK(d[0].host == "example.com");
  CHECK(d[0].port == 80);
  CHECK(h.resolved() == 0);

  std::string tls = h.request("CONNECT example.com:443 HTTP/1.1\r\n\r\n");
  CHECK(status_line(tls) == "HTTP/1.1 403 Forbidden");
}

TEST_CASE("wildcards reach subdomains at any depth, never the bare domain", "[egress]") {
  Upstream up;
  uint16_t port = up.port();
  std::map<std::string, std::vector<std::string>> names = {{"api.example.test", {"127.0.0.1"}},
                                                           {"a.b.example.test", {"127.0.0.1"}},
                                                           {"example.test", {"127.0.0.1"}}};
  Harness h({rule("*.example.test:" + std::to_string(port), true)}, {}, names);
  for (const char* host : {"api.example.test", "a.b.example.test"}) {
    INFO(host);
    std::string url = std::string("http://") + host + ":" + std::to_string(port) + "/hello";
    std::string response = h.request("GET " + url + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
    CHECK(status_line(response) == "HTTP/1.1 200 OK");
    CHECK(body_of(response) == "hello");
  }
  std::string bare =
      h.request("GET http://example.test:" + std::to_string(port) + "/hello HTTP/1.1\r\n\r\n");
  CHECK(status_line(bare) == "HTTP/1.1 403 Forbidden");
  CHECK(bare.find("not-allowlisted") != std::string::npos);
}

TEST_CASE("a port the rule does not give is refused, naming the ports it does", "[egress]") {
  Harness h({rule("example.com")}, {}, {{"example.com", {"93.184.216.34"}}});
  std::string response = h.request("CONNECT example.com:8443 HTTP/1.1\r\n\r\n");
  CHECK(status_line(response) == "HTTP/1.1 403 Forbidden");
  CHECK(response.find("X-Belljar-Denied: port-not-allowed") != std::string::npos);
  CHECK(body_of(response).find("port 8443 is not allowed for example.com (allowed: 80, 443)") !=
        std::string::npos);
}

TEST_CASE("a name that resolves inside is refused unless its rule is local", "[egress]") {
  Upstream up;
  uint16_t port = up.port();
  std::string p = std::to_string(port);
  std::map<std::string, std::vector<std::string>> names = {
      {"rebind.example", {"127.0.0.1"}},
      {"metadata.example", {"169.254.169.254"}},
      {"lan.example", {"10.1.2.3", "192.168.0.1"}},
      {"mapped.example", {"::ffff:127.0.0.1"}},
      {"local.example", {"127.0.0.1"}}};
  Harness h({rule("rebind.example:" + p), rule("metadata.example:" + p), rule("lan.example:" + p),
             rule("mapped.example:" + p), rule("local.example:" + p, true)},
            {}, names);
  struct Row {
    const char* host;
    const char* said;
  };
  for (Row row : {Row{"rebind.example", "resolves to 127.0.0.1, a loopback address"},
                  Row{"metadata.example", "resolves to 169.254.169.254, a link-local address"},
                  Row{"lan.example", "resolves to 10.1.2.3, a private-network address"},
                  Row{"mapped.example", "resolves to ::ffff:127.0.0.1, a loopback address"}}) {
    INFO(row.host);
    std::string response =
        h.request(std::string("GET http://") + row.host + ":" + p + "/hello HTTP/1.1\r\n\r\n");
    CHECK(status_line(response) == "HTTP/1.1 403 Forbidden");
    CHECK(response.find("X-Belljar-Denied: private-address") != std::string::npos);
    CHECK(body_of(response).find(row.said) != std::string::npos);
    CHECK(body_of(response).find("--allow-local-net") != std::string::npos);
  }
  CHECK(up.accepted() == 0);
  std::string local = h.request("GET http://local.example:" + p + "/hello HTTP/1.1\r\n\r\n");
  CHECK(status_line(local) == "HTTP/1.1 200 OK");
  auto d = h.decisions(5);
  REQUIRE(d.size() == 5);
  CHECK(d[0].reason == "private-address");
  CHECK(d[0].address == "127.0.0.1");
  CHECK(d[4].decision == "allowed");
  CHECK(d[4].rule == "--allow-local-net local.example:" + p);
}

TEST_CASE("CONNECT tunnels bytes both ways and passes half-closes", "[egress]") {
  Upstream echo(true);
  std::string target = "127.0.0.1:" + std::to_string(echo.port());
  Harness h({rule(target)});
  Fd client = h.connect();
  send_all(client.get(), "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n");
  std::string established = "HTTP/1.1 200 Connection established\r\n\r\n";
  std::string got;
  while (got.size() < established.size() && readable(client.get(), 5000ms)) {
    char buf[256];
    ssize_t n = ::recv(client.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  CHECK(got == established);
  send_all(client.get(), "ping over the tunnel");
  ::shutdown(client.get(), SHUT_WR);
  CHECK(read_all(client.get()) == "ping over the tunnel");
  CHECK(h.settles());
}

TEST_CASE("requests that are not proxy requests get 400", "[egress]") {
  Harness h({rule("example.com")});
  for (const char* head :
       {"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", "GET https://example.com/ HTTP/1.1\r\n\r\n",
        "BREW coffee://pot HTTP/1.1\r\n\r\n", "GET http://exa_mple.com/ HTTP/1.1\r\n\r\n"}) {
    INFO(head);
    std::string response = h.request(head);
    CHECK(status_line(response) == "HTTP/1.1 400 Bad Request");
    CHECK(response.find("X-Belljar-Denied: bad-request") != std::string::npos);
  }
  std::string huge =
      "GET http://example.com/ HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n";
  CHECK(status_line(h.request(huge)) == "HTTP/1.1 431 Request Header Fields Too Large");
}

TEST_CASE("upstream failures answer 502 and 504", "[egress]") {
  uint16_t closed_port;
  { Fd probe = listen_loopback(closed_port); }  // a port nothing listens on now
  EgressLimits limits;
  limits.resolve_timeout = 300ms;
  std::string p = std::to_string(closed_port);
  Harness h({rule("127.0.0.1:" + p), rule("nowhere.example:" + p), rule("slow.example:" + p)},
            limits, {{"slow.example", {"8.8.8.8"}}});
  std::string refused = h.request("GET http://127.0.0.1:" + p + "/ HTTP/1.1\r\n\r\n");
  CHECK(status_line(refused) == "HTTP/1.1 502 Bad Gateway");
  CHECK(refused.find("X-Belljar-Error: connect-failed") != std::string::npos);
  CHECK(body_of(refused).find("Connection refused") != std::string::npos);
  std::string unknown = h.request("GET http://nowhere.example:" + p + "/ HTTP/1.1\r\n\r\n");
  CHECK(status_line(unknown) == "HTTP/1.1 502 Bad Gateway");
  CHECK(body_of(unknown).find("cannot resolve nowhere.example") != std::string::npos);
  auto d = h.decisions(2);
  CHECK(d[0].decision == "failed");
  CHECK(d[0].reason == "connect-failed");
  CHECK(d[1].reason == "resolve-failed");

  // The resolver answers only once the client has its response, so never before the proxy's
  // timeout: a 504 is the timeout's (had the proxy waited, it would have tried the address and
  // said connect-failed).
  Harness slow({rule("slow.example:80")}, limits, {{"slow.example", {"8.8.8.8"}}},
               Answers::when_released);
  std::string timed_out = slow.request("GET http://slow.example/ HTTP/1.1\r\n\r\n");
  slow.release_resolver();
  CHECK(status_line(timed_out) == "HTTP/1.1 504 Gateway Timeout");
}

TEST_CASE("a stuck upstream or a slow client does not delay another connection", "[egress]") {
  Upstream up;
  std::string target = "127.0.0.1:" + std::to_string(up.port());
  Harness h({rule(target)});
  Fd stuck = h.connect();
  send_all(stuck.get(), "GET http://" + target + "/stall HTTP/1.1\r\n\r\n");
  REQUIRE(up.accepted_at_least(1));  // the stuck one is held upstream
  Fd dribbling = h.connect();
  send_all(dribbling.get(), "GET http://" + target);  // and nothing more, for now
  // The channel hands connections over in order: the proxy holds the dribbling one before the
  // third asks.
  std::string fast = h.request("GET http://" + target + "/hello HTTP/1.1\r\n\r\n");
  CHECK(body_of(fast) == "hello");  // served while the other two still wait
  send_all(dribbling.get(), "/hello HTTP/1.1\r\n\r\n");
  CHECK(body_of(read_all(dribbling.get())) == "hello");
}

TEST_CASE("a client that disconnects frees its upstream", "[egress]") {
  Upstream up;
  std::string target = "127.0.0.1:" + std::to_string(up.port());
  Harness h({rule(target)});
  {
    Fd client = h.connect();
    send_all(client.get(), "GET http://" + target + "/stall HTTP/1.1\r\n\r\n");
    REQUIRE(up.accepted_at_least(1));
  }  // the client goes
  CHECK(up.closed_at_least(1));
  CHECK(up.closed_connections() == 1);
  CHECK(h.settles());
}

TEST_CASE("connections are bounded: the one past the limit gets 503", "[egress]") {
  EgressLimits limits;
  limits.max_connections = 4;
  Harness h({rule("example.com")}, limits);
  std::vector<Fd> held;
  // The channel hands connections over in order: these four are held before the fifth comes.
  for (int i = 0; i < 4; ++i) held.push_back(h.connect());
  std::string response = h.request("GET http://example.com/ HTTP/1.1\r\n\r\n");
  CHECK(status_line(response) == "HTTP/1.1 503 Service Unavailable");
  held.clear();
  CHECK(h.settles());
  CHECK(status_line(h.request("GET http://example.com/ HTTP/1.1\r\n\r\n")) ==
        "HTTP/1.1 502 Bad Gateway");
}

TEST_CASE("a client that never finishes its head is closed at the head timeout", "[egress]") {
  EgressLimits limits;
  limits.head_timeout = 200ms;
  Harness h({rule("example.com")}, limits);
  Fd client = h.connect();
  send_all(client.get(), "GET http://exa");
  CHECK(read_all(client.get(), 3000ms).empty());
  CHECK(h.settles());  // closed by the proxy, the client still holding its end
}

TEST_CASE("a large response streams through the bounded buffers intact", "[egress]") {
  Upstream up;
  std::string target = "127.0.0.1:" + std::to_string(up.port());
  EgressLimits limits;
  limits.buffer_bytes = 16 * 1024;
  Harness h({rule(target)}, limits);
  std::string response = h.request("GET http://" + target + "/big HTTP/1.1\r\n\r\n");
  CHECK(status_line(response) == "HTTP/1.1 200 OK");
  CHECK(body_of(response).size() == size_t(4 << 20));
  CHECK(body_of(response).find_first_not_of('x') == std::string::npos);
}

TEST_CASE("hundreds of requests leave no descriptor behind", "[egress]") {
  Upstream up;
  std::string target = "127.0.0.1:" + std::to_string(up.port());
  Harness h({rule(target)});
  h.request("GET http://" + target + "/hello HTTP/1.1\r\n\r\n");  // warm: threads, buffers
  REQUIRE(h.settles());
  size_t before = open_fds();
  for (int i = 0; i < 300; ++i) {
    std::string response =
        h.request(i % 3 == 0 ? "GET http://elsewhere.example/ HTTP/1.1\r\n\r\n"
                             : "GET http://" + target + "/hello HTTP/1.1\r\n\r\n");
    REQUIRE(response.find("HTTP/1.1") == 0);
  }
  REQUIRE(h.settles());
  CHECK(open_fds() == before);
  CHECK(h.decisions(300).size() == 301);
}

TEST_CASE("what arrives on the channel is checked: only stream sockets become connections",
          "[egress]") {
  Harness h({rule("example.com")});
  int sp[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
  Fd a(sp[0]), b(sp[1]);
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  Fd r(pipe_fds[0]), w(pipe_fds[1]);
  Fd channel_probe = h.connect();  // proves the channel works before and after
  // A pipe is not a socket: dropped without a word.
  int channel_pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel_pair) == 0);
  Fd ours(channel_pair[0]);
  h.proxy().attach(Fd(channel_pair[1]));
  REQUIRE(send_fd(ours.get(), r.get()) == 0);
  REQUIRE(send_fd(ours.get(), a.get()) == 0);  // a SEQPACKET socket: not a stream either
  // The proxy's copies are the last: once it drops them, the pipe has no reader and the
  // socket's peer is gone. Had it kept either as a connection, neither would happen.
  r.reset();
  a.reset();
  CHECK(reports(w.get(), POLLERR));  // the write end of a pipe without a reader
  CHECK(reports(b.get(), POLLHUP));
  CHECK(h.proxy().open_connections() == 1);  // only channel_probe's
  ours.reset();                              // that sandbox is gone: the proxy lets its channel go
  send_all(channel_probe.get(), "GET http://example.com/ HTTP/1.1\r\n\r\n");
  CHECK(status_line(read_all(channel_probe.get())) == "HTTP/1.1 502 Bad Gateway");
}

TEST_CASE("past its refusal budget the proxy answers new connections unread, counted only",
          "[egress]") {
  // The red team's flood, scaled down: 20,000 denied CONNECTs cost the supervisor 1.7 times the
  // CPU they cost the cell. With no refill, the count is exact whatever the timing.
  EgressLimits limits;
  limits.refusal_burst = 5;
  limits.refusals_per_second = 0;
  Harness h({rule("example.com")}, limits);
  std::vector<std::string> denied_as;
  for (int i = 0; i < 40; ++i) {
    std::string response = h.request(i % 2 ? "CONNECT flood.example:443 HTTP/1.1\r\n\r\n"
                                           : "GET http://flood.example/ HTTP/1.1\r\n\r\n");
    REQUIRE(status_line(response) == "HTTP/1.1 403 Forbidden");
    auto at = response.find("X-Belljar-Denied: ");
    REQUIRE(at != std::string::npos);
    denied_as.push_back(response.substr(at + 18, response.find('\r', at) - at - 18));
  }
  // The first five were refused one by one (decision, audit, metrics); the rest unread.
  CHECK(std::count(denied_as.begin(), denied_as.begin() + 5, "not-allowlisted") == 5);
  CHECK(std::count(denied_as.begin() + 5, denied_as.end(), "refusals-rate-limited") == 35);
  REQUIRE(h.settles());
  auto taken = h.proxy().take_decisions();
  CHECK(taken.items.size() == 5);
  CHECK(taken.refused_unread == 35);
  // An allowed request too, while the budget is spent: the session brought it on itself.
  CHECK(h.request("GET http://example.com/ HTTP/1.1\r\n\r\n").find("refusals-rate-limited") !=
        std::string::npos);
  CHECK(h.proxy().take_decisions().refused_unread == 1);
}

TEST_CASE("the refusal budget refills at its rate, up to its burst", "[egress]") {
  RefusalBudget budget(2, 10);
  auto t = RefusalBudget::Clock::now();
  CHECK(budget.available(t));
  budget.spend(t);
  budget.spend(t);
  CHECK_FALSE(budget.available(t));
  CHECK_FALSE(budget.available(t + 50ms));  // half a token
  CHECK(budget.available(t + 100ms));
  budget.spend(t + 100ms);
  CHECK_FALSE(budget.available(t + 100ms));
  CHECK(budget.available(t + 10s));  // and no more than the burst after a long pause
  budget.spend(t + 10s);
  budget.spend(t + 10s);
  CHECK_FALSE(budget.available(t + 10s));
}
