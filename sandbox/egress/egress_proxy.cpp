#include "sandbox/egress/egress_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "sandbox/egress/address_policy.hpp"
#include "sandbox/os/fd_passing.hpp"
#include "sandbox/egress/allowlist.hpp"
#include "sandbox/egress/http_head.hpp"
#include "sandbox/os/setup_error.hpp"
#include "sandbox/egress/tls_client_hello.hpp"

namespace belljar {

namespace {

using Clock = std::chrono::steady_clock;

// A direction that has carried this much is bulk: it goes on by splice() (see Splice).
constexpr uint64_t kSpliceAfter = 256 * 1024;
constexpr size_t kPipeBytes = 256 * 1024;

// epoll's user data: an id and which of its descriptors woke us.
enum Side : uint64_t { kWake = 0, kChannel = 1, kClient = 2, kUpstream = 3 };
uint64_t tag(uint64_t id, Side side) {
  return (id << 2) | side;
}

void notify(int eventfd) {
  uint64_t one = 1;
  ssize_t ignored = ::write(eventfd, &one, sizeof one);
  (void)ignored;
}

void clear(int eventfd) {
  uint64_t count;
  ssize_t ignored = ::read(eventfd, &count, sizeof count);
  (void)ignored;
}

// A byte queue with a soft cap: reads stop at the cap (that is the backpressure), while the
// proxy's own edits (a rewritten head) may briefly pass it. Memory comes on first use.
class Buffer {
 public:
  explicit Buffer(size_t capacity = 0) : capacity_(capacity) {}
  size_t size() const { return end_ - start_; }
  bool empty() const { return start_ == end_; }
  size_t space() const { return size() >= capacity_ ? 0 : capacity_ - size(); }
  std::string_view view() const { return {data_.data() + start_, size()}; }

  // One recv() of at most min(space(), limit) bytes; returns as recv() does.
  ssize_t fill(int fd, size_t limit = SIZE_MAX) {
    size_t want = std::min(space(), limit);
    if (want == 0) {
      errno = EAGAIN;
      return -1;
    }
    reserve_tail(want);
    ssize_t n;
    while ((n = ::recv(fd, data_.data() + end_, want, 0)) < 0 && errno == EINTR) {
    }
    if (n > 0) end_ += static_cast<size_t>(n);
    return n;
  }
  // One send() of at most `limit` bytes from the front.
  ssize_t drain(int fd, size_t limit = SIZE_MAX) {
    size_t want = std::min(size(), limit);
    if (want == 0) return 0;
    ssize_t n;
    while ((n = ::send(fd, data_.data() + start_, want, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    if (n > 0) consume(static_cast<size_t>(n));
    return n;
  }
  void append(std::string_view bytes) { splice(size(), 0, bytes); }
  void consume(size_t n) {
    start_ += std::min(n, size());
    if (start_ == end_) start_ = end_ = 0;
  }
  // Replaces `length` bytes at `offset` (from the front) with `with`.
  void splice(size_t offset, size_t length, std::string_view with) {
    std::string rebuilt;
    rebuilt.reserve(size() - length + with.size());
    std::string_view current = view();
    rebuilt.append(current.substr(0, offset));
    rebuilt.append(with);
    rebuilt.append(current.substr(offset + length));
    data_.assign(rebuilt.begin(), rebuilt.end());
    start_ = 0;
    end_ = rebuilt.size();
  }

 private:
  void reserve_tail(size_t want) {
    if (data_.size() - end_ >= want) return;
    if (start_ > 0) {
      std::memmove(data_.data(), data_.data() + start_, size());
      end_ -= start_;
      start_ = 0;
    }
    if (data_.size() - end_ < want) data_.resize(end_ + want);
  }
  std::vector<char> data_;
  size_t start_ = 0, end_ = 0;
  size_t capacity_;
};

// A direction's bulk path: once a relay has carried enough to be worth two descriptors, its
// bytes go socket -> pipe -> socket by splice(), which moves page references instead of copying
// them through the proxy's memory. The pipe's 64 KiB are that direction's buffer then.
struct Splice {
  Fd read, write;
  size_t bytes = 0;  // in the pipe now
  size_t capacity = 64 * 1024;
};

enum class Phase {
  head,        // reading the request head
  resolving,   // waiting for the resolver
  connecting,  // a non-blocking connect() in flight
  hello,       // a tunnel to a name: reading the client's ClientHello, nothing forwarded yet
  relaying,    // bytes both ways
  answering,   // delivering the proxy's own response, then lingering
  lingering,   // response sent: reading what the client still sends until it closes
};

struct Connection {
  uint64_t id = 0;
  Fd client, upstream;
  // Edge-triggered epoll: what each side was last seen able to do, until EAGAIN says otherwise.
  bool client_in = false, client_out = false, upstream_in = false, upstream_out = false;
  Phase phase = Phase::head;
  Buffer up, down;  // client -> upstream, upstream -> client
  Clock::time_point deadline;
  RequestHead request;
  RequestHost host;
  const HostRule* rule = nullptr;
  std::vector<IpAddress> addresses;
  size_t next_address = 0;
  std::string last_error;
  bool client_eof = false, upstream_eof = false, upstream_shut = false, client_shut = false;
  // Plain HTTP: the response head is rewritten (Connection: close) before the client sees it.
  // Bytes before `head_from` (interim 1xx heads) may already go to the client.
  bool response_head_pending = false;
  size_t head_from = 0;
  size_t discarded = 0;
  uint64_t carried_up = 0, carried_down = 0;  // bytes relayed each way
  uint64_t body_left = 0;  // plain HTTP: request body bytes still to forward (Content-Length)
  std::optional<Splice> splice_up, splice_down;
};

std::string host_port(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string ports_text(const std::vector<uint16_t>& ports) {
  std::string text;
  for (uint16_t p : ports) text += (text.empty() ? "" : ", ") + std::to_string(p);
  return text;
}

}  // namespace

struct EgressProxy::Loop {
  // What other threads hand the loop: the kernel's attach(), the resolvers' answers, stop.
  struct Inbox {
    std::mutex mutex;
    std::vector<Fd> channels;
    std::vector<std::pair<uint64_t, Resolution>> resolved;
    bool stop = false;
    Fd wake;
  };

  std::vector<HostRule> rules;
  EgressLimits limits;
  Fd epoll;
  std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  std::unique_ptr<ResolverPool> resolver;

  std::mutex decisions_mutex;
  std::deque<EgressDecision> decisions;
  uint64_t dropped = 0;
  Fd decisions_event;

  std::atomic<size_t> open_count{0};
  std::map<uint64_t, Fd> channels;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections;
  std::vector<uint64_t> again;  // relays cut short for fairness, to go on after this round
  size_t splices = 0;           // pipes open for bulk directions
  uint64_t next_id = 1;

  Loop(std::vector<HostRule> r, EgressLimits l, NameResolver resolve)
      : rules(std::move(r)), limits(l) {
    epoll.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll) throw SetupError("egress proxy: epoll_create1: " + errno_text(errno));
    inbox->wake.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    decisions_event.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!inbox->wake || !decisions_event)
      throw SetupError("egress proxy: eventfd: " + errno_text(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag(0, kWake);
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, inbox->wake.get(), &ev) != 0)
      throw SetupError("egress proxy: epoll_ctl: " + errno_text(errno));
    std::weak_ptr<Inbox> weak = inbox;
    resolver =
        std::make_unique<ResolverPool>(limits.resolver_threads, limits.max_connections,
                                       std::move(resolve), [weak](uint64_t job, Resolution result) {
                                         auto box = weak.lock();
                                         if (!box) return;
                                         std::lock_guard lock(box->mutex);
                                         box->resolved.emplace_back(job, std::move(result));
                                         notify(box->wake.get());
                                       });
  }

  ~Loop() {
    resolver.reset();  // no answer arrives after this
  }

  // ---- the loop ---------------------------------------------------------------------------

  void run() {
    epoll_event events[64];
    for (;;) {
      int timeout = again.empty() ? next_timeout_ms() : 0;
      int n = ::epoll_wait(epoll.get(), events, 64, timeout);
      if (n < 0 && errno != EINTR) return;  // cannot happen with a valid epoll fd
      for (int i = 0; i < std::max(n, 0); ++i) {
        uint64_t data = events[i].data.u64;
        uint64_t id = data >> 2;
        switch (static_cast<Side>(data & 3)) {
          case kWake:
            if (!take_inbox()) return;
            break;
          case kChannel:
            read_channel(id);
            break;
          case kClient:
          case kUpstream:
            if (auto it = connections.find(id); it != connections.end())
              on_event(*it->second, static_cast<Side>(data & 3), events[i].events);
            break;
        }
      }
      std::vector<uint64_t> resume;
      resume.swap(again);
      for (uint64_t id : resume)
        if (auto it = connections.find(id);
            it != connections.end() && it->second->phase == Phase::relaying)
          relay(*it->second);
      expire(Clock::now());
    }
  }

  int next_timeout_ms() const {
    if (connections.empty()) return -1;
    auto next = Clock::time_point::max();
    for (const auto& [id, c] : connections) next = std::min(next, c->deadline);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(ms + 1, 0, 60'000));
  }

  // False when told to stop.
  bool take_inbox() {
    clear(inbox->wake.get());
    std::vector<Fd> new_channels;
    std::vector<std::pair<uint64_t, Resolution>> answers;
    {
      std::lock_guard lock(inbox->mutex);
      if (inbox->stop) return false;
      new_channels.swap(inbox->channels);
      answers.swap(inbox->resolved);
    }
    for (auto& channel : new_channels) {
      uint64_t id = next_id++;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = tag(id, kChannel);
      if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, channel.get(), &ev) == 0)
        channels.emplace(id, std::move(channel));
    }
    for (auto& [id, result] : answers)
      if (auto it = connections.find(id);
          it != connections.end() && it->second->phase == Phase::resolving)
        on_resolved(*it->second, std::move(result));
    return true;
  }

  void read_channel(uint64_t id) {
    auto it = channels.find(id);
    if (it == channels.end()) return;
    // A bounded batch per wakeup, so a flood of connections cannot starve the others.
    for (int i = 0; i < 64; ++i) {
      int status = 0;
      Fd client = receive_fd(it->second.get(), status);
      if (status == EAGAIN) return;
      if (status != 0) {  // the sandbox's end closed (or broke): that jail is gone
        ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, it->second.get(), nullptr);
        channels.erase(it);
        return;
      }
      if (client) adopt(std::move(client));
    }
  }

  void adopt(Fd client) {
    // Whatever arrives is checked: a connected stream socket, or nothing.
    struct stat st {};
    int type = 0;
    socklen_t len = sizeof type;
    if (::fstat(client.get(), &st) != 0 || !S_ISSOCK(st.st_mode) ||
        ::getsockopt(client.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
      return;
    ::fcntl(client.get(), F_SETFL, ::fcntl(client.get(), F_GETFL) | O_NONBLOCK);
    if (connections.size() >= limits.max_connections) {
      std::string why = "the egress proxy is at its limit of " +
                        std::to_string(limits.max_connections) +
                        " open connections; try again when some have closed";
      std::string response = proxy_response(503, "Service Unavailable", "belljar: " + why + "\n",
                                            {{"X-Belljar-Error", "too-many-connections"}});
      ssize_t ignored =
          ::send(client.get(), response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)ignored;
      post({"", "", 0, "failed", "", "too-many-connections", why, ""});
      return;
    }
    int one = 1;
    ::setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Connection>();
    c->id = next_id++;
    c->client = std::move(client);
    c->up = Buffer(limits.buffer_bytes);
    c->down = Buffer(limits.buffer_bytes);
    c->deadline = Clock::now() + limits.head_timeout;
    if (!watch(c->client.get(), tag(c->id, kClient))) return;
    connections.emplace(c->id, std::move(c));
    open_count = connections.size();
  }

  // ---- events and deadlines ---------------------------------------------------------------

  void on_event(Connection& c, Side side, uint32_t events) {
    // A hang-up or an error shows up as "readable/writable": the next call says which.
    bool in = events & (EPOLLIN | EPOLLHUP | EPOLLERR),
         out = events & (EPOLLOUT | EPOLLHUP | EPOLLERR);
    if (side == kClient) {
      c.client_in = c.client_in || in;
      c.client_out = c.client_out || out;
    } else {
      if (!c.upstream) return;  // an event for a connection attempt already given up
      c.upstream_in = c.upstream_in || in;
      c.upstream_out = c.upstream_out || out;
    }
    if (side == kUpstream && c.phase == Phase::connecting) {
      finish_connect(c);
      return;
    }
    switch (c.phase) {
      case Phase::head:
        read_head(c);
        break;
      case Phase::relaying:
        relay(c);
        break;
      case Phase::hello:
        if (side == kClient) read_hello(c);
        break;
      case Phase::answering:
      case Phase::lingering:
        answer(c);
        break;
      default:
        break;
    }
  }

  void expire(Clock::time_point now) {
    std::vector<uint64_t> due;
    for (const auto& [id, c] : connections)
      if (c->deadline <= now) due.push_back(id);
    for (uint64_t id : due) {
      auto it = connections.find(id);
      if (it == connections.end()) continue;
      Connection& c = *it->second;
      switch (c.phase) {
        case Phase::resolving:
          fail(c, 504, "Gateway Timeout", "timeout", "timed out resolving " + c.host.name);
          break;
        case Phase::connecting:
          c.last_error = "timed out";
          drop_upstream(c);
          connect_next(c);
          break;
        case Phase::hello:
          refuse_tunnel(c, "sni-missing",
                        "no TLS ClientHello within " +
                            std::to_string(limits.hello_timeout.count() / 1000) + " s");
          break;
        default:  // a slow request head, an idle relay, a client that won't read its answer
          close(c);
          break;
      }
    }
  }

  // ---- the request ------------------------------------------------------------------------

  void read_head(Connection& c) {
    while (c.client_in) {
      ssize_t n = c.up.fill(
          c.client.get(), limits.max_head_bytes + 1 - std::min(c.up.size(), limits.max_head_bytes));
      if (n == 0 || (n < 0 && errno != EAGAIN)) {
        close(c);  // gone before it asked for anything
        return;
      }
      if (n < 0) {
        c.client_in = false;
        break;
      }
      if (auto end = find_head_end(c.up.view())) {
        start_request(c, *end);
        return;
      }
      if (c.up.size() > limits.max_head_bytes) {
        deny(c, 431, "Request Header Fields Too Large", "bad-request",
             "the request head is larger than " + std::to_string(limits.max_head_bytes) + " bytes");
        return;
      }
    }
  }

  void start_request(Connection& c, size_t head_length) {
    try {
      c.request = parse_request_head(c.up.view().substr(0, head_length));
    } catch (const HttpHeadError& e) {
      deny(c, 400, "Bad Request", "bad-request", std::string("a malformed request: ") + e.what());
      return;
    }
    c.up.consume(head_length);
    auto host = normalize_host(c.request.host);
    if (!host) {
      deny(c, 400, "Bad Request", "bad-request",
           "\"" + c.request.host + "\" is not a host name or an IP address");
      return;
    }
    c.host = *host;
    HostVerdict verdict = match_host(rules, c.host, c.request.port);
    if (verdict.kind == HostVerdict::Kind::host_not_allowed) {
      deny(c, 403, "Forbidden", "not-allowlisted",
           c.host.name + " is not on this kernel's allowlist (--allow-net)");
      return;
    }
    if (verdict.kind == HostVerdict::Kind::port_not_allowed) {
      deny(c, 403, "Forbidden", "port-not-allowed",
           "port " + std::to_string(c.request.port) + " is not allowed for " + c.host.name +
               " (allowed: " + ports_text(verdict.allowed_ports) + ")");
      return;
    }
    c.rule = verdict.rule;
    if (!c.request.tunnel && !check_plain_request(c)) return;
    if (c.host.literal) {
      // The rule names this very address: allowed whatever its scope, as the user asked.
      c.addresses = {*c.host.literal};
      connect_next(c);
      return;
    }
    if (!resolver->submit(c.id, c.host.name)) {
      fail(c, 503, "Service Unavailable", "too-many-connections",
           "too many names are being resolved; try again");
      return;
    }
    c.phase = Phase::resolving;
    c.deadline = Clock::now() + limits.resolve_timeout;
  }

  void on_resolved(Connection& c, Resolution result) {
    if (result.addresses.empty()) {
      fail(c, 502, "Bad Gateway", "resolve-failed",
           "cannot resolve " + c.host.name + ": " + result.error);
      return;
    }
    // DNS decides nothing on its own: a name that lands inside (rebinding, a hostile record,
    // the metadata service) is refused unless the rule says the host is local.
    std::vector<IpAddress> usable;
    std::optional<std::pair<IpAddress, AddressScope>> refused;
    for (const auto& address : result.addresses) {
      AddressScope scope = classify(address);
      if (scope == AddressScope::public_unicast || c.rule->local)
        usable.push_back(address);
      else if (!refused)
        refused = {address, scope};
    }
    if (usable.empty()) {
      c.addresses = {refused->first};
      deny(c, 403, "Forbidden", "private-address",
           c.host.name + " resolves to " + refused->first.text() + ", " +
               describe_scope(refused->second) +
               "; only a host allowed with --allow-local-net may reach loopback or private "
               "networks");
      return;
    }
    c.addresses = std::move(usable);
    connect_next(c);
  }

  void connect_next(Connection& c) {
    while (c.next_address < c.addresses.size() && c.next_address < 8) {
      const IpAddress& address = c.addresses[c.next_address++];
      sockaddr_storage storage{};
      socklen_t length;
      if (address.family == AF_INET) {
        auto* sin = reinterpret_cast<sockaddr_in*>(&storage);
        sin->sin_family = AF_INET;
        sin->sin_port = htons(c.request.port);
        std::memcpy(&sin->sin_addr, address.bytes.data(), 4);
        length = sizeof(sockaddr_in);
      } else {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(&storage);
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(c.request.port);
        std::memcpy(&sin6->sin6_addr, address.bytes.data(), 16);
        length = sizeof(sockaddr_in6);
      }
      Fd sock(::socket(address.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!sock) {
        c.last_error = errno_text(errno);
        continue;
      }
      int one = 1;
      ::setsockopt(sock.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      int rc = ::connect(sock.get(), reinterpret_cast<sockaddr*>(&storage), length);
      if (rc != 0 && errno != EINPROGRESS) {
        c.last_error = errno_text(errno);
        continue;
      }
      if (!watch(sock.get(), tag(c.id, kUpstream))) {
        c.last_error = errno_text(errno);
        continue;
      }
      c.upstream = std::move(sock);
      c.upstream_in = c.upstream_out = false;
      if (rc == 0) {
        connected(c);
        return;
      }
      c.phase = Phase::connecting;
      c.deadline = Clock::now() + limits.connect_timeout;
      return;
    }
    std::string target = host_port(c.host.name, c.request.port);
    bool timed_out = c.last_error == "timed out";
    fail(c, timed_out ? 504 : 502, timed_out ? "Gateway Timeout" : "Bad Gateway",
         timed_out ? "timeout" : "connect-failed",
         "cannot connect to " + target + ": " + c.last_error);
  }

  void finish_connect(Connection& c) {
    int error = 0;
    socklen_t len = sizeof error;
    if (::getsockopt(c.upstream.get(), SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
    if (error == 0) {
      sockaddr_storage peer{};
      socklen_t peer_len = sizeof peer;
      if (::getpeername(c.upstream.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
        c.upstream_out = false;  // not connected yet (a stale wakeup): the connect's own comes
        return;
      }
      c.upstream_out = true;
      connected(c);
      return;
    }
    c.last_error = errno_text(error);
    drop_upstream(c);
    connect_next(c);
  }

  void connected(Connection& c) {
    const IpAddress& address = c.addresses[c.next_address - 1];
    if (c.request.tunnel && !c.host.literal) {
      // A name: the decision waits for the ClientHello's SNI (read_hello).
      c.down.append("HTTP/1.1 200 Connection established\r\n\r\n");
      c.phase = Phase::hello;
      c.deadline = Clock::now() + limits.hello_timeout;
      read_hello(c);
      return;
    }
    post({c.request.method, c.host.name, c.request.port, "allowed", rule_flag_text(*c.rule), "", "",
          address.text()});
    c.phase = Phase::relaying;
    c.deadline = Clock::now() + limits.idle_timeout;
    if (c.request.tunnel) {
      // A rule that names an address: whatever runs there was allowed, TLS or not, any SNI.
      c.down.append("HTTP/1.1 200 Connection established\r\n\r\n");
    } else {
      c.up.splice(0, 0, upstream_request_head(c.request));
      c.response_head_pending = true;
    }
    relay(c);
  }

  // ---- what goes out is what was allowed ----------------------------------------------------

  // A plain request's body must be framed by one Content-Length, so nothing after it can pass
  // as a second request (whose Host the proxy would never have seen). Its own Host is replaced
  // by the request line's (upstream_request_head).
  bool check_plain_request(Connection& c) {
    if (c.request.chunked) {
      deny(c, 411, "Length Required", "bad-request",
           "a chunked request body is not forwarded over plain HTTP (where it ends is where a "
           "smuggled request would begin); send Content-Length");
      return false;
    }
    uint64_t body = c.request.content_length.value_or(0);
    // What came with the head beyond the body is dropped, never forwarded.
    if (c.up.size() > body) c.up.splice(body, c.up.size() - body, "");
    c.body_left = body - c.up.size();
    return true;
  }

  // Reads and drops what a plain client sends after its body; -1 on an error, 1 if anything
  // (or end of file) was read, 0 otherwise.
  int discard_from_client(Connection& c) {
    char sink[16384];
    ssize_t n;
    while ((n = ::recv(c.client.get(), sink, sizeof sink, 0)) < 0 && errno == EINTR) {
    }
    if (n == 0) {
      c.client_eof = true;
      return 1;
    }
    if (n < 0) {
      if (errno != EAGAIN) return -1;
      c.client_in = false;
      return 0;
    }
    c.discarded += static_cast<size_t>(n);
    return c.discarded > (1u << 20) ? -1 : 1;
  }

  // A tunnel to a name: deliver the 200, then read (and hold) the client's first bytes until
  // they make a ClientHello; its SNI must be the CONNECT host.
  void read_hello(Connection& c) {
    while (c.client_out && !c.down.empty()) {
      size_t want = c.down.size();
      ssize_t n = c.down.drain(c.client.get());
      if (n < 0 && errno != EAGAIN) return close(c);
      if (n < static_cast<ssize_t>(want)) c.client_out = false;
    }
    for (;;) {
      ClientHelloScan scan = scan_client_hello(c.up.view(), limits.max_hello_bytes);
      if (scan.status == ClientHelloScan::Status::malformed)
        return refuse_tunnel(c, "sni-missing", "no usable TLS ClientHello: " + scan.error);
      if (scan.status == ClientHelloScan::Status::complete) {
        if (!scan.server_name)
          return refuse_tunnel(c, "sni-missing",
                               "the TLS ClientHello names no server (SNI); a tunnel to a name "
                               "must name it");
        auto named = normalize_host(*scan.server_name);
        if (!named || named->literal || named->name != c.host.name)
          return refuse_tunnel(c, "sni-mismatch",
                               "the TLS ClientHello names \"" + scan.server_name->substr(0, 255) +
                                   "\", not " + c.host.name);
        post({c.request.method, c.host.name, c.request.port, "allowed", rule_flag_text(*c.rule), "",
              "", c.addresses[c.next_address - 1].text()});
        c.phase = Phase::relaying;
        c.deadline = Clock::now() + limits.idle_timeout;
        relay(c);  // the ClientHello, as it came, goes first
        return;
      }
      if (!c.client_in || c.client_eof) return;
      ssize_t n = c.up.fill(c.client.get(), limits.max_hello_bytes + 1 -
                                                std::min(c.up.size(), limits.max_hello_bytes));
      if (n == 0) return close(c);  // gone before it said anything
      if (n < 0) {
        if (errno != EAGAIN) return close(c);
        c.client_in = false;
        return;
      }
    }
  }

  // The client already has its 200: a TLS alert tells its library why the tunnel closes.
  void refuse_tunnel(Connection& c, const std::string& reason, const std::string& why) {
    post({c.request.method, c.host.name, c.request.port, "denied", rule_flag_text(*c.rule), reason,
          why,
          c.next_address > 0 && c.next_address <= c.addresses.size()
              ? c.addresses[c.next_address - 1].text()
              : ""});
    respond(c, std::string(tls_access_denied_alert()));
  }

  // ---- relaying ---------------------------------------------------------------------------

  // Moves what it can both ways until nothing moves. Reads stop when a buffer is full (that
  // is the backpressure) and resume when it drains; the readiness flags remember the rest.
  void relay(Connection& c) {
    bool moved_any = false;
    for (int round = 0;; ++round) {
      if (round == 16) {
        again.push_back(c.id);  // fairness: the others get a turn, then this one goes on
        break;
      }
      bool moved = false;
      // client -> upstream
      // Only tunnels go bulk upwards: a plain request's body is counted through the buffer.
      if (!c.splice_up && c.request.tunnel && c.up.empty() && c.carried_up >= kSpliceAfter)
        c.splice_up = make_splice();
      if (c.splice_up) {
        int r = splice_move(*c.splice_up, c.client.get(), c.client_in, c.client_eof,
                            c.upstream.get(), c.upstream_out, c.carried_up);
        if (r < 0) return close(c);
        moved = moved || r > 0;
      } else {
        if (!c.request.tunnel && c.body_left == 0 && c.client_in && !c.client_eof) {
          // The declared body is through: what follows (a pipelined request) is never sent on.
          int r = discard_from_client(c);
          if (r < 0) return close(c);
          moved = moved || r > 0;
        } else if (c.client_in && !c.client_eof && c.up.space() > 0) {
          ssize_t n = c.up.fill(c.client.get(), c.request.tunnel ? SIZE_MAX : c.body_left);
          if (n > 0 && !c.request.tunnel) c.body_left -= static_cast<uint64_t>(n);
          if (n > 0)
            moved = true;
          else if (n == 0)
            c.client_eof = moved = true;
          else if (errno == EAGAIN)
            c.client_in = false;
          else
            return close(c);
        }
        if (c.upstream_out && !c.up.empty()) {
          size_t want = c.up.size();
          ssize_t n = c.up.drain(c.upstream.get());
          if (n > 0) {
            moved = true;
            c.carried_up += static_cast<size_t>(n);
          }
          if (n < 0 && errno != EAGAIN) return close(c);
          if (n < static_cast<ssize_t>(want)) c.upstream_out = false;  // its buffer is full
        }
      }
      bool up_empty = c.up.empty() && (!c.splice_up || c.splice_up->bytes == 0);
      if (c.client_eof && up_empty && !c.upstream_shut) {
        // A plain HTTP client that hangs up is gone: free its upstream at once. A tunnel's
        // half-close is passed on, and the tunnel ends when both sides have.
        if (!c.request.tunnel) return close(c);
        ::shutdown(c.upstream.get(), SHUT_WR);
        c.upstream_shut = true;
      }
      // upstream -> client
      if (!c.splice_down && c.down.empty() && !c.response_head_pending &&
          c.carried_down >= kSpliceAfter)
        c.splice_down = make_splice();
      if (c.splice_down) {
        int r = splice_move(*c.splice_down, c.upstream.get(), c.upstream_in, c.upstream_eof,
                            c.client.get(), c.client_out, c.carried_down);
        if (r < 0) return close(c);
        moved = moved || r > 0;
      } else {
        if (c.upstream_in && !c.upstream_eof && c.down.space() > 0) {
          ssize_t n = c.down.fill(c.upstream.get());
          if (n > 0)
            moved = true;
          else if (n == 0)
            c.upstream_eof = moved = true;
          else if (errno == EAGAIN)
            c.upstream_in = false;
          else
            return close(c);
        }
        if (c.response_head_pending) rewrite_response_head(c);
        size_t ready = c.response_head_pending ? c.head_from : c.down.size();
        if (c.client_out && ready > 0) {
          ssize_t n = c.down.drain(c.client.get(), ready);
          if (n > 0) {
            moved = true;
            c.carried_down += static_cast<size_t>(n);
            if (c.response_head_pending) c.head_from -= static_cast<size_t>(n);
          }
          if (n < 0 && errno != EAGAIN) return close(c);
          if (n < static_cast<ssize_t>(ready)) c.client_out = false;
        }
      }
      bool down_empty = c.down.empty() && (!c.splice_down || c.splice_down->bytes == 0);
      if (c.upstream_eof && down_empty && !c.response_head_pending) {
        if (!c.request.tunnel) return close(c);  // the response is complete: Connection: close
        if (!c.client_shut) {
          ::shutdown(c.client.get(), SHUT_WR);
          c.client_shut = true;
        }
      }
      if (c.client_shut && c.upstream_shut) return close(c);
      moved_any = moved_any || moved;
      if (!moved) break;
    }
    if (moved_any) c.deadline = Clock::now() + limits.idle_timeout;
  }

  void rewrite_response_head(Connection& c) {
    while (c.response_head_pending) {
      std::string_view rest = c.down.view().substr(c.head_from);
      auto end = find_head_end(rest);
      if (!end) {
        // No whole head within the buffer, or none at all: pass what comes through untouched.
        if (c.upstream_eof || c.down.size() >= limits.buffer_bytes) c.response_head_pending = false;
        return;
      }
      ResponseHead head;
      try {
        head = parse_response_head(rest.substr(0, *end));
      } catch (const HttpHeadError&) {
        c.response_head_pending = false;
        return;
      }
      if (head.status >= 100 && head.status < 200 && head.status != 101) {
        c.head_from += *end;  // 100 Continue and friends go as they are; the real head follows
        continue;
      }
      if (head.status != 101) c.down.splice(c.head_from, *end, client_response_head(head));
      c.response_head_pending = false;
    }
  }

  // A pipe for a bulk direction, if the budget allows (each costs two descriptors).
  std::optional<Splice> make_splice() {
    if (splices >= limits.max_spliced) return std::nullopt;
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return std::nullopt;
    ++splices;
    // A bigger pipe moves more per call; where the system won't have it, 64 KiB will do.
    int size = ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(kPipeBytes));
    Splice splice;
    splice.capacity = size > 0 ? static_cast<size_t>(size) : 64 * 1024;
    splice.read.reset(fds[0]);
    splice.write.reset(fds[1]);
    return splice;
  }

  // One step of socket -> pipe -> socket. Returns -1 on a broken connection, 1 if bytes moved
  // (or end of file was seen), 0 otherwise. EAGAIN from the first splice is ambiguous (no
  // data, or the pipe has no free slot): the source counts as drained only with an empty pipe.
  static int splice_move(Splice& pipe, int from, bool& from_in, bool& from_eof, int to,
                         bool& to_out, uint64_t& carried) {
    int moved = 0;
    if (from_in && !from_eof && pipe.bytes < pipe.capacity) {
      ssize_t n = ::splice(from, nullptr, pipe.write.get(), nullptr, pipe.capacity - pipe.bytes,
                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        pipe.bytes += static_cast<size_t>(n);
        moved = 1;
      } else if (n == 0) {
        from_eof = true;
        moved = 1;
      } else if (errno == EAGAIN) {
        if (pipe.bytes == 0) from_in = false;
      } else if (errno != EINTR) {
        return -1;
      }
    }
    if (to_out && pipe.bytes > 0) {
      size_t want = pipe.bytes;
      ssize_t n =
          ::splice(pipe.read.get(), nullptr, to, nullptr, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        pipe.bytes -= static_cast<size_t>(n);
        carried += static_cast<uint64_t>(n);
        moved = 1;
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return -1;
      }
      if (n < static_cast<ssize_t>(want)) to_out = false;
    }
    return moved;
  }

  // ---- the proxy's own answers ------------------------------------------------------------

  void deny(Connection& c, int status, const char* reason_phrase, const std::string& reason,
            const std::string& why) {
    std::string subject = c.host.name.empty() ? c.request.host : c.host.name;
    std::string body = subject.empty()
                           ? "belljar: egress proxy: " + why + "\n"
                           : "belljar: egress to " + host_port(subject, c.request.port) +
                                 " refused: " + why + "\n";
    post({c.request.method, subject, c.request.port, "denied",
          c.rule ? rule_flag_text(*c.rule) : "", reason, why,
          c.addresses.empty() ? "" : c.addresses.front().text()});
    respond(c, proxy_response(status, reason_phrase, body, {{"X-Belljar-Denied", reason}}));
  }

  void fail(Connection& c, int status, const char* reason_phrase, const std::string& reason,
            const std::string& why) {
    post({c.request.method, c.host.name, c.request.port, "failed",
          c.rule ? rule_flag_text(*c.rule) : "", reason, why,
          c.next_address > 0 && c.next_address <= c.addresses.size()
              ? c.addresses[c.next_address - 1].text()
              : ""});
    respond(c, proxy_response(status, reason_phrase, "belljar: " + why + "\n",
                              {{"X-Belljar-Error", reason}}));
  }

  void respond(Connection& c, const std::string& response) {
    drop_upstream(c);
    c.up = Buffer(0);
    c.down = Buffer(limits.buffer_bytes);
    c.down.append(response);
    c.phase = Phase::answering;
    c.deadline = Clock::now() + limits.answer_timeout;
    answer(c);
  }

  // Delivers the answer, then reads (and drops) what the client still sends until it closes:
  // closing with unread bytes would reset the connection and could destroy the answer.
  void answer(Connection& c) {
    if (c.phase == Phase::answering) {
      while (!c.down.empty()) {
        if (!c.client_out) return;
        size_t want = c.down.size();
        ssize_t n = c.down.drain(c.client.get());
        if (n < 0 && errno == EAGAIN)
          n = 0;
        else if (n <= 0)
          return close(c);
        if (static_cast<size_t>(n) < want) c.client_out = false;
      }
      ::shutdown(c.client.get(), SHUT_WR);
      c.phase = Phase::lingering;
      c.deadline = Clock::now() + std::chrono::seconds(2);
    }
    char sink[16384];
    while (c.client_in) {
      ssize_t n = ::recv(c.client.get(), sink, sizeof sink, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        c.client_in = false;
        break;
      }
      if (n <= 0) return close(c);
      c.discarded += static_cast<size_t>(n);
      if (c.discarded > (1u << 20)) return close(c);
    }
  }

  // ---- bookkeeping ------------------------------------------------------------------------

  // Each socket is registered once, for everything, edge-triggered: no epoll_ctl() per
  // buffer that fills or drains. The flags in Connection carry what the edges said.
  bool watch(int fd, uint64_t data) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = data;
    return ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev) == 0;
  }

  void drop_upstream(Connection& c) {
    if (!c.upstream) return;
    ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, c.upstream.get(), nullptr);
    c.upstream.reset();
    c.upstream_in = c.upstream_out = false;
  }

  void close(Connection& c) {
    splices -= (c.splice_up ? 1 : 0) + (c.splice_down ? 1 : 0);
    ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, c.client.get(), nullptr);
    drop_upstream(c);
    connections.erase(c.id);  // closes the client's socket (and frees c)
    open_count = connections.size();
  }

  void post(EgressDecision decision) {
    {
      std::lock_guard lock(decisions_mutex);
      if (decisions.size() >= limits.max_queued_decisions) {
        ++dropped;
      } else {
        decisions.push_back(std::move(decision));
      }
    }
    notify(decisions_event.get());
  }
};

EgressProxy::EgressProxy(std::vector<HostRule> rules, EgressLimits limits, NameResolver resolve)
    : loop_(std::make_unique<Loop>(std::move(rules), limits, std::move(resolve))) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  try {
    thread_ = std::thread([loop = loop_.get()] { loop->run(); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

EgressProxy::~EgressProxy() {
  {
    std::lock_guard lock(loop_->inbox->mutex);
    loop_->inbox->stop = true;
  }
  notify(loop_->inbox->wake.get());
  if (thread_.joinable()) thread_.join();
}

void EgressProxy::attach(Fd channel) {
  ::fcntl(channel.get(), F_SETFL, ::fcntl(channel.get(), F_GETFL) | O_NONBLOCK);
  std::lock_guard lock(loop_->inbox->mutex);
  loop_->inbox->channels.push_back(std::move(channel));
  notify(loop_->inbox->wake.get());
}

int EgressProxy::decisions_fd() const {
  return loop_->decisions_event.get();
}

EgressProxy::Decisions EgressProxy::take_decisions() {
  clear(loop_->decisions_event.get());
  Decisions out;
  std::lock_guard lock(loop_->decisions_mutex);
  out.items.assign(std::make_move_iterator(loop_->decisions.begin()),
                   std::make_move_iterator(loop_->decisions.end()));
  loop_->decisions.clear();
  out.dropped = std::exchange(loop_->dropped, 0);
  return out;
}

size_t EgressProxy::open_connections() const {
  return loop_->open_count.load();
}

}  // namespace belljar
