#include "kernel/protocol/zmtp_gate.hpp"

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

namespace belljar {

namespace {
constexpr size_t kQueueCap = 256 * 1024;  // bytes waiting for one side, each way
constexpr uint64_t kDoorTag = uint64_t{1} << 62;
constexpr uint64_t kWakeTag = uint64_t{1} << 63;

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
  ZmtpMeter meter;
  std::string up, down;  // waiting for the ZMQ socket; waiting for the peer
  bool outer_eof = false, inner_eof = false, done = false;
  uint32_t outer_watch = 0, inner_watch = 0;  // what epoll watches on each
};

ZmtpGate::ZmtpGate(GateLimits limits)
    : limits_(limits),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!epoll_ || !wake_) throw errno_error("the Jupyter ports' gate");
  epoll_event event{EPOLLIN, {}};
  event.data.u64 = kWakeTag;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &event) != 0)
    throw errno_error("the Jupyter ports' gate");
}

ZmtpGate::~ZmtpGate() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    thread_.join();
  }
}

void ZmtpGate::add_door(Fd listener, std::string inner_path, std::string channel) {
  epoll_event event{EPOLLIN, {}};
  event.data.u64 = kDoorTag | doors_.size();
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener.get(), &event) != 0)
    throw errno_error("the " + channel + " channel's gate");
  doors_.push_back({std::move(listener), std::move(inner_path), std::move(channel)});
}

void ZmtpGate::start() {
  thread_ = std::thread([this] { run(); });
}

std::vector<std::string> ZmtpGate::take_refusals() {
  std::lock_guard<std::mutex> lock(refusals_mutex_);
  std::vector<std::string> taken;
  taken.swap(refusals_);
  return taken;
}

void ZmtpGate::run() {
  epoll_event events[64];
  for (;;) {
    int n = ::epoll_wait(epoll_.get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the descriptor is gone: nothing more can be served
    }
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) return;  // ~ZmtpGate
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
    Fd outer(
        ::accept4(doors_[door].listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!outer) return;  // EAGAIN, or a peer that left before it was accepted
    auto say = [&](const std::string& why) { record_refusal(door, why); };
    if (passages_.size() >= limits_.max_connections) {
      say("more than " + std::to_string(limits_.max_connections) + " connections at once");
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
        if (!p.meter.feed(std::string_view(buffer, static_cast<size_t>(n))))
          return refuse(p, p.meter.why());
        enforce_budget();
        if (p.done) return;
        p.up.append(buffer, static_cast<size_t>(n));
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

void ZmtpGate::record_refusal(size_t door, const std::string& why) {
  std::lock_guard<std::mutex> lock(refusals_mutex_);
  refusals_.push_back(doors_[door].channel + ": " + why);
}

void ZmtpGate::refuse(Passage& p, const std::string& why) {
  record_refusal(p.door, why);
  p.done = true;
  closing_.push_back(p.id);
}

// Past the budget, the connection holding the most unfinished bytes goes, until within it.
void ZmtpGate::enforce_budget() {
  for (;;) {
    uint64_t total = 0;
    Passage* largest = nullptr;
    for (auto& [id, passage] : passages_) {
      if (passage.done) continue;  // going: libzmq drops what it held on the disconnect
      total += passage.meter.unfinished_bytes();
      if (!largest || passage.meter.unfinished_bytes() > largest->meter.unfinished_bytes())
        largest = &passage;
    }
    if (total <= limits_.budget || !largest) return;
    refuse(*largest, "holding " + std::to_string(largest->meter.unfinished_bytes() >> 20) +
                         " MiB of unfinished messages when all peers together passed " +
                         std::to_string(limits_.budget >> 20) + " MiB");
  }
}

void ZmtpGate::close(uint64_t id) {
  auto it = passages_.find(id);
  if (it == passages_.end()) return;
  // Closing a descriptor takes it out of the epoll set.
  passages_.erase(it);
}

}  // namespace belljar
