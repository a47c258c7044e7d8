#include "kernel/protocol/zmtp_gate.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace belljar {

namespace {
constexpr size_t kQueueCap = 256 * 1024;  // bytes waiting for one side, each way
constexpr uint64_t kNewsTag = uint64_t{1} << 61;
constexpr uint64_t kDoorTag = uint64_t{1} << 62;
constexpr uint64_t kWakeTag = uint64_t{1} << 63;
constexpr size_t kGreeting = 64;
// Identities the gate gives peers that declare none: no declared one can take them (a ROUTER
// door admits one connection per identity).
constexpr std::string_view kGivenIdentity("\0belljar-gate-", 14);
constexpr size_t kMaxNews = 4096;  // the front door's words waiting, and refusals: past it, dropped

// The source address a cap counts by: the IP (an IPv4-mapped one as IPv4), or "local" for a
// unix socket (every local peer is one).
std::string peer_address(const sockaddr_storage& from) {
  char text[INET6_ADDRSTRLEN] = "";
  if (from.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&from)->sin_addr, text, sizeof text);
  } else if (from.ss_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&from)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a))
      ::inet_ntop(AF_INET, &a.s6_addr[12], text, sizeof text);
    else
      ::inet_ntop(AF_INET6, &a, text, sizeof text);
  } else {
    return "local";
  }
  return text;
}

std::string size_text(uint64_t bytes) {
  return bytes >= (uint64_t{1} << 20) ? std::to_string(bytes >> 20) + " MiB"
                                      : std::to_string(bytes >> 10) + " KiB";
}

std::string seconds(std::chrono::milliseconds bound) {
  auto tenths = bound.count() / 100;
  return std::to_string(tenths / 10) + (tenths % 10 ? "." + std::to_string(tenths % 10) : "") +
         " s";
}

std::runtime_error errno_error(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

Fd connect_unix(const std::string& path) {
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return {};
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) return {};
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  // Blocking: the ZMQ socket behind is in this process and accepts at once.
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return {};
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) return {};
  return fd;
}
// What `fd` has, up to `room` bytes: its length; 0 when nothing waits; -1 at its end or on an
// error.
ssize_t read_some(int fd, char* buffer, size_t room) {
  ssize_t n = ::read(fd, buffer, room);
  if (n > 0) return n;
  return n < 0 && errno == EAGAIN ? 0 : -1;
}

// Sends what `queue` holds, as far as `fd` takes it; false once `fd` is gone (the queue is
// dropped then: nobody will read it).
bool send_queued(int fd, std::string& queue, bool& moved) {
  ssize_t n = ::send(fd, queue.data(), queue.size(), MSG_NOSIGNAL);
  if (n > 0) {
    queue.erase(0, static_cast<size_t>(n));
    moved = true;
  } else if (n < 0 && errno != EAGAIN) {
    queue.clear();
    return false;
  }
  return true;
}
}  // namespace

struct ZmtpGate::Passage {
  explicit Passage(const ZmtpLimits& limits) : meter(limits) {}
  uint64_t id = 0;
  Fd outer, inner;  // the peer's connection; ours to the ZMQ socket
  size_t door = 0;
  Clock::time_point accepted, last_message;  // its connect; its last whole message
  std::string address;                       // peer_address
  std::string identity;                      // from READY: declared, or the gate's
  bool declared = false, handshaken = false, authenticated = false;
  uint64_t offset = 0;  // bytes read from the peer
  std::string held;     // the READY frame as far as it came, and what followed it
  ZmtpMeter meter;
  std::string up, down;  // waiting for the ZMQ socket; waiting for the peer
  bool outer_eof = false, inner_eof = false, done = false;
  uint32_t outer_watch = 0, inner_watch = 0;  // what epoll watches on each
};

ZmtpGate::ZmtpGate(GateLimits limits)
    : limits_(limits),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      news_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!epoll_ || !wake_ || !news_) throw errno_error("the Jupyter ports' gate");
  for (auto [fd, tag] : {std::pair{wake_.get(), kWakeTag}, std::pair{news_.get(), kNewsTag}}) {
    epoll_event event{EPOLLIN, {}};
    event.data.u64 = tag;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0)
      throw errno_error("the Jupyter ports' gate");
  }
}

ZmtpGate::~ZmtpGate() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    thread_.join();
  }
}

void ZmtpGate::add_door(Fd listener, std::string inner_path, std::string channel) {
  const DoorRule* rule = std::find_if(std::begin(kDoorRules), std::end(kDoorRules),
                                      [&](const DoorRule& r) { return channel == r.channel; });
  if (rule == std::end(kDoorRules)) throw std::logic_error("no door rule for " + channel);
  epoll_event event{EPOLLIN, {}};
  event.data.u64 = kDoorTag | doors_.size();
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener.get(), &event) != 0)
    throw errno_error("the " + channel + " channel's gate");
  doors_.push_back({std::move(listener), std::move(inner_path), std::move(channel), *rule});
}

void ZmtpGate::start() {
  thread_ = std::thread([this] { run(); });
}

void ZmtpGate::authenticated(const std::string& channel, std::string identity) {
  tell({channel, std::move(identity), true});
}

void ZmtpGate::refused(const std::string& channel, std::string identity) {
  tell({channel, std::move(identity), false});
}

void ZmtpGate::tell(Word word) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (news_from_front_.size() >= kMaxNews) return;
    news_from_front_.push_back(std::move(word));
  }
  uint64_t one = 1;
  (void)!::write(news_.get(), &one, sizeof one);
}

std::vector<std::string> ZmtpGate::take_refusals() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> taken;
  taken.swap(refusals_);
  return taken;
}

void ZmtpGate::run() {
  epoll_event events[64];
  for (;;) {
    int timeout = enforce_deadlines();
    for (uint64_t id : closing_) close(id);
    closing_.clear();
    int n = ::epoll_wait(epoll_.get(), events, 64, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the descriptor is gone: nothing more can be served
    }
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) return;  // ~ZmtpGate
      if (tag == kNewsTag) {
        take_news();
        continue;
      }
      if (tag & kDoorTag) {
        accept_all(static_cast<size_t>(tag & ~kDoorTag));
        continue;
      }
      auto it = passages_.find(tag >> 1);
      if (it != passages_.end() && !it->second.done) move(it->second);
    }
    for (uint64_t id : closing_) close(id);
    closing_.clear();
  }
}

void ZmtpGate::accept_all(size_t door) {
  for (;;) {
    sockaddr_storage from{};
    socklen_t from_size = sizeof from;
    Fd outer(::accept4(doors_[door].listener.get(), reinterpret_cast<sockaddr*>(&from), &from_size,
                       SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!outer) return;  // EAGAIN, or a peer that left before it was accepted
    auto say = [&](const std::string& why) { record_refusal(door, why); };
    std::string address = peer_address(from);
    if (!make_room(door, address)) {
      say("more than " + std::to_string(limits_.max_connections) +
          " connections at once, all of them authenticated");
      continue;
    }
    int one = 1;  // as libzmq does: a small message goes out at once (unix sockets say no)
    (void)::setsockopt(outer.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Fd inner = connect_unix(doors_[door].inner_path);
    if (!inner) {
      say(std::string("the channel's socket did not take the connection: ") + std::strerror(errno));
      continue;
    }
    uint64_t id = next_id_++;
    Passage& p = passages_.emplace(id, Passage(limits_.message)).first->second;
    p.id = id;
    p.accepted = p.last_message = Clock::now();
    p.address = std::move(address);
    p.outer = std::move(outer);
    p.inner = std::move(inner);
    p.door = door;
    for (int side = 0; side < 2; ++side) {
      epoll_event event{0, {}};
      event.data.u64 = (id << 1) | static_cast<uint64_t>(side);
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, side ? p.inner.get() : p.outer.get(), &event))
        p.done = true;
    }
    if (p.done) {
      closing_.push_back(id);
      continue;
    }
    move(p);
  }
}

// Moves what it can both ways, metering what the peer sends, until nothing moves or for a few
// rounds: then the others get a turn (epoll is level-triggered: what is left wakes it again),
// so one peer streaming a large message never starves the heartbeat.
void ZmtpGate::move(Passage& p) {
  char buffer[64 * 1024];
  bool moved = true;
  for (int round = 0; moved && !p.done && round < 16; ++round) {
    moved = false;
    if (!p.outer_eof && p.up.size() < kQueueCap) {
      ssize_t n =
          read_some(p.outer.get(), buffer, std::min(sizeof buffer, kQueueCap - p.up.size()));
      if (n < 0) {
        p.outer_eof = true;
      } else if (n > 0) {
        uint64_t messages = p.meter.messages();
        if (!p.meter.feed(std::string_view(buffer, static_cast<size_t>(n))))
          return refuse(p, p.meter.why());
        if (p.meter.messages() != messages) p.last_message = Clock::now();
        std::string bytes(buffer, static_cast<size_t>(n));
        if (!p.handshaken && !finish_handshake(p, bytes)) return;
        enforce_budget();
        if (p.done) return;
        p.up += bytes;
        moved = true;
      }
    }
    if (!p.up.empty() && !send_queued(p.inner.get(), p.up, moved)) p.inner_eof = true;
    if (!p.inner_eof && p.down.size() < kQueueCap) {
      ssize_t n =
          read_some(p.inner.get(), buffer, std::min(sizeof buffer, kQueueCap - p.down.size()));
      if (n < 0) {
        p.inner_eof = true;
      } else if (n > 0) {
        p.down.append(buffer, static_cast<size_t>(n));
        moved = true;
      }
    }
    if (!p.down.empty() && !send_queued(p.outer.get(), p.down, moved)) p.outer_eof = true;
  }
  if (p.done) return;
  // Either side gone: what it sent before goes on, then both close.
  if ((p.outer_eof && p.up.empty()) || (p.inner_eof && p.down.empty())) {
    // A peer that left by itself is no news (every client's shutdown closes five): only the
    // gate's own closes, each said with its reason, are followed by a disconnect in the log.
    if (p.outer_eof) note_quiet_close(p.door);
    p.done = true;
    closing_.push_back(p.id);
    return;
  }
  watch(p);
}

void ZmtpGate::watch(Passage& p) {
  constexpr uint32_t in = EPOLLIN, out = EPOLLOUT, none = 0;
  uint32_t outer =
      (!p.outer_eof && p.up.size() < kQueueCap ? in : none) | (!p.down.empty() ? out : none);
  uint32_t inner =
      (!p.inner_eof && p.down.size() < kQueueCap ? in : none) | (!p.up.empty() ? out : none);
  // A side at its end is no longer watched at all: epoll reports a hang-up whatever one asks,
  // and what is left for the other side waits on that side's own readiness.
  constexpr uint32_t kGone = ~uint32_t{0};
  auto update = [&](Fd& fd, uint32_t want, uint32_t& have, uint64_t side) {
    bool at_end = side ? p.inner_eof : p.outer_eof;
    if (have == kGone) return;
    if (at_end) {
      (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd.get(), nullptr);
      have = kGone;
      return;
    }
    if (want == have) return;
    epoll_event event{want, {}};
    event.data.u64 = (p.id << 1) | side;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd.get(), &event) == 0) have = want;
  };
  update(p.outer, outer, p.outer_watch, 0);
  update(p.inner, inner, p.inner_watch, 1);
}

// A new connection from `address` to `door`: room for it among the caps, made by closing the
// oldest unauthenticated connection that stands in its way; false when only authenticated ones
// fill the doors.
bool ZmtpGate::make_room(size_t door, const std::string& address) {
  // Unauthenticated connections by address, oldest first (ids grow): this door's, and all.
  std::map<std::string, std::vector<Passage*>> on_door, anywhere;
  size_t live = 0;
  for (auto& [id, passage] : passages_) {
    if (passage.done) continue;
    ++live;
    if (passage.authenticated) continue;
    anywhere[passage.address].push_back(&passage);
    if (passage.door == door) on_door[passage.address].push_back(&passage);
  }
  auto& mine = on_door[address];
  if (mine.size() >= limits_.per_address) {
    refuse(*mine.front(), "the oldest of " + std::to_string(mine.size()) +
                              " unauthenticated connections from " + address +
                              ", closed for a new one (at most " +
                              std::to_string(limits_.per_address) + " per address and door)");
    --live;
  }
  if (live < limits_.max_connections) return true;
  // The address holding most on this door gives its oldest; when none is on it, the address
  // holding most anywhere.
  for (auto* by_address : {&on_door, &anywhere}) {
    std::vector<Passage*>* most = nullptr;
    for (auto& [from, passages] : *by_address) {
      std::erase_if(passages, [](const Passage* p) { return p->done; });
      // Of addresses holding as many, the one whose oldest is oldest: on a tie, a client's
      // connection made a moment ago never goes before the older ones.
      if (!passages.empty() &&
          (!most || passages.size() > most->size() ||
           (passages.size() == most->size() && passages.front()->id < most->front()->id)))
        most = &passages;
    }
    if (!most) continue;
    refuse(*most->front(),
           "the oldest unauthenticated connection of the address holding most, "
           "closed for a new one (at most " +
               std::to_string(limits_.max_connections) + " connections in all)");
    return true;
  }
  return false;
}

// The peer's bytes before its READY is whole: the greeting passes (libzmq answers it part by
// part), READY and what follows are held. Once READY is in, its identity is read, or one is
// given, and `bytes` becomes what may pass on. False when the connection was refused.
bool ZmtpGate::finish_handshake(Passage& p, std::string& bytes) {
  size_t greeting = p.offset < kGreeting ? std::min<size_t>(kGreeting - p.offset, bytes.size()) : 0;
  p.offset += bytes.size();
  p.held.append(bytes, greeting);
  bytes.resize(greeting);
  if (!p.meter.handshake_done()) return true;
  const DoorRule& rule = doors_[p.door].rule;
  ZmtpProperties properties = read_ready(p.meter.ready_body()).value();  // the meter read it
  auto is_identity = [](const auto& property) { return property.first == "Identity"; };
  // libzmq takes the last of several: the gate must know the one the socket will.
  if (std::count_if(properties.begin(), properties.end(), is_identity) > 1) {
    refuse(p, "a READY naming its identity twice");
    return false;
  }
  auto named = std::find_if(properties.begin(), properties.end(), is_identity);
  p.declared = named != properties.end() && !named->second.empty();
  bool given = false;
  if (p.declared) {
    p.identity = named->second;
  } else if (rule.routes) {
    p.identity = std::string(kGivenIdentity) + std::to_string(p.id);
    if (named == properties.end())
      properties.emplace_back("Identity", p.identity);
    else
      named->second = p.identity;
    given = true;
  }
  if (p.declared && p.identity.starts_with(kGivenIdentity)) {
    refuse(p, "an identity of the kind the gate gives");
    return false;
  }
  bool linked = false, door_has_one = false;
  for (auto& [id, other] : passages_) {
    if (other.done || &other == &p || !p.declared || other.identity != p.identity) continue;
    if (rule.routes && other.door == p.door) {
      refuse(p, "an identity another connection holds on this door");
      return false;
    }
    // A connection of the same client (one identity) that authenticated: this one is its own,
    // once per door.
    linked = linked || (other.authenticated && doors_[other.door].rule.signs);
    door_has_one = door_has_one || (other.authenticated && other.door == p.door);
  }
  if (linked && !door_has_one && rule.links) p.authenticated = true;
  size_t ready_size = p.meter.handshake_end() - kGreeting;
  bytes += given ? ready_frame(properties) : p.held.substr(0, ready_size);
  bytes.append(p.held, ready_size);
  std::string().swap(p.held);
  p.handshaken = true;
  return true;
}

void ZmtpGate::take_news() {
  uint64_t count;
  (void)!::read(news_.get(), &count, sizeof count);
  std::vector<Word> news;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    news.swap(news_from_front_);
  }
  for (const Word& word : news) {
    for (auto& [id, passage] : passages_) {
      if (passage.done || !passage.handshaken || passage.identity != word.identity ||
          doors_[passage.door].channel != word.channel || !doors_[passage.door].rule.signs)
        continue;
      if (word.accepted)
        mark_authenticated(passage);
      else if (!passage.authenticated)
        refuse(passage, "unauthenticated, it sent a message the kernel refused");
    }
  }
}

// `p` proved itself; so do the connections that declared its identity on the doors that link,
// one per door.
void ZmtpGate::mark_authenticated(Passage& p) {
  if (p.authenticated) return;
  p.authenticated = true;
  if (!p.declared || !doors_[p.door].rule.signs) return;
  for (auto& entry : passages_) {
    Passage& other = entry.second;  // a name the lambda below may capture (clang 14)
    if (other.done || other.authenticated || !other.declared || other.identity != p.identity ||
        !doors_[other.door].rule.links)
      continue;
    bool door_has_one = std::any_of(passages_.begin(), passages_.end(), [&](const auto& entry) {
      const Passage& q = entry.second;
      return !q.done && q.authenticated && q.door == other.door && q.identity == p.identity;
    });
    if (!door_has_one) other.authenticated = true;
  }
}

// The handshake's bound for every connection; the signed message's where clients sign.
int ZmtpGate::enforce_deadlines() {
  auto now = Clock::now();
  auto next = Clock::time_point::max();
  for (auto& [id, p] : passages_) {
    if (p.done) continue;
    if (!p.handshaken) {
      auto due = p.accepted + limits_.handshake;
      if (now >= due) {
        refuse(p, "no ZMTP handshake within " + seconds(limits_.handshake));
        continue;
      }
      next = std::min(next, due);
    }
    if (doors_[p.door].rule.signs && !p.authenticated) {
      auto due = p.last_message + limits_.unauthenticated;
      if (now >= due) {
        if (doors_[p.door].idle_close_said) {
          note_quiet_close(p.door);  // its disconnect is not news either
          close_quietly(p);
        } else {
          doors_[p.door].idle_close_said = true;
          refuse(p, "unauthenticated, and no message for " + seconds(limits_.unauthenticated) +
                        " (said once for this door; a client's idle socket reconnects)");
        }
        continue;
      }
      next = std::min(next, due);
    }
  }
  if (next == Clock::time_point::max()) return -1;
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::min<int64_t>(wait, 60'000));
}

void ZmtpGate::record_refusal(size_t door, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The log is rate-limited anyway: a flood of connections must not grow this while the
  // reactor is busy.
  if (refusals_.size() < kMaxNews) refusals_.push_back(doors_[door].channel + ": " + why);
}

void ZmtpGate::refuse(Passage& p, const std::string& why) {
  record_refusal(p.door, why);
  close_quietly(p);
}

void ZmtpGate::close_quietly(Passage& p) {
  p.done = true;
  closing_.push_back(p.id);
}

void ZmtpGate::note_quiet_close(size_t door) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++quiet_closes_[doors_[door].channel];
}

bool ZmtpGate::take_quiet_close(const std::string& channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = quiet_closes_.find(channel);
  if (it == quiet_closes_.end() || it->second == 0) return false;
  --it->second;
  return true;
}

// Past the budget, the unauthenticated connection holding the most unfinished bytes goes, until
// within it; an authenticated one only when no unauthenticated one holds any.
void ZmtpGate::enforce_budget() {
  for (;;) {
    uint64_t total = 0;
    Passage* largest = nullptr;
    auto ahead = [](const Passage& a, const Passage* b) {
      if (!b) return true;
      bool a_held = a.meter.unfinished_bytes() > 0, b_held = b->meter.unfinished_bytes() > 0;
      // Anything an unauthenticated peer holds goes before what an authenticated one does.
      if ((a_held && !a.authenticated) != (b_held && !b->authenticated))
        return a_held && !a.authenticated;
      return a.meter.unfinished_bytes() > b->meter.unfinished_bytes();
    };
    for (auto& [id, passage] : passages_) {
      if (passage.done) continue;  // going: libzmq drops what it held on the disconnect
      total += passage.meter.unfinished_bytes();
      if (ahead(passage, largest)) largest = &passage;
    }
    if (total <= limits_.budget || !largest) return;
    refuse(*largest, std::string(largest->authenticated ? "authenticated, " : "unauthenticated, ") +
                         "holding " + size_text(largest->meter.unfinished_bytes()) +
                         " of unfinished messages when all peers together passed " +
                         size_text(limits_.budget));
  }
}

void ZmtpGate::close(uint64_t id) {
  auto it = passages_.find(id);
  if (it == passages_.end()) return;
  // Closing a descriptor takes it out of the epoll set.
  passages_.erase(it);
}

}  // namespace belljar
