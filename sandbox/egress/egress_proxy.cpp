// The egress proxy's thread, its epoll loop and its inbox (egress_proxy.hpp). Runs in the
// supervisor, outside the sandbox; the connections themselves are egress_connection.cpp's.
#include "sandbox/egress/egress_proxy.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>

#include "sandbox/egress/egress_connection.hpp"
#include "sandbox/os/fd_passing.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

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
  SecretBroker broker;
  Fd epoll;
  std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  std::unique_ptr<ResolverPool> resolver;
  DecisionQueue decisions;
  std::unique_ptr<Connections> connections;
  std::map<uint64_t, Fd> channels;  // the jails' SOCK_SEQPACKET ends, by id
  uint64_t next_channel = 1;

  Loop(std::vector<HostRule> r, EgressLimits l, NameResolver resolve, SecretBroker b)
      : rules(std::move(r)), limits(l), broker(std::move(b)), decisions(l.max_queued_decisions) {
    epoll.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll) throw SetupError("egress proxy: epoll_create1: " + errno_text(errno));
    inbox->wake.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!inbox->wake) throw SetupError("egress proxy: eventfd: " + errno_text(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = epoll_tag(0, kWake);
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
    connections =
        std::make_unique<Connections>(rules, limits, epoll.get(), *resolver, decisions, broker);
  }

  ~Loop() {
    resolver.reset();  // no answer arrives after this
  }

  void run() {
    epoll_event events[64];
    for (;;) {
      int timeout = connections->resumable() ? 0 : connections->next_timeout_ms();
      int unread = decisions.unread_flush_ms(EgressClock::now());
      if (unread >= 0 && (timeout < 0 || unread < timeout)) timeout = unread;
      int n = ::epoll_wait(epoll.get(), events, 64, timeout);
      if (n < 0 && errno != EINTR) return;  // cannot happen with a valid epoll fd
      for (int i = 0; i < std::max(n, 0); ++i) {
        uint64_t data = events[i].data.u64;
        uint64_t id = data >> 2;
        auto side = static_cast<EgressSide>(data & 3);
        switch (side) {
          case kWake:
            if (!take_inbox()) return;
            break;
          case kChannel:
            read_channel(id);
            break;
          case kClient:
          case kUpstream:
            connections->on_event(id, side, events[i].events);
            break;
        }
      }
      connections->resume();
      connections->expire(EgressClock::now());
      decisions.flush_unread(EgressClock::now());
    }
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
      uint64_t id = next_channel++;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = epoll_tag(id, kChannel);
      if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, channel.get(), &ev) == 0)
        channels.emplace(id, std::move(channel));
    }
    for (auto& [id, result] : answers) connections->on_resolved(id, std::move(result));
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
      if (client) connections->adopt(std::move(client));
    }
  }
};

EgressProxy::EgressProxy(std::vector<HostRule> rules, EgressLimits limits, NameResolver resolve,
                         SecretBroker broker)
    : loop_(
          std::make_unique<Loop>(std::move(rules), limits, std::move(resolve), std::move(broker))) {
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
  return loop_->decisions.fd();
}

EgressProxy::Decisions EgressProxy::take_decisions() {
  return loop_->decisions.take();
}

size_t EgressProxy::open_connections() const {
  return loop_->connections->open();
}

double EgressProxy::thread_cpu_seconds() const {
  clockid_t clock;
  timespec spent{};
  if (::pthread_getcpuclockid(const_cast<std::thread&>(thread_).native_handle(), &clock) != 0 ||
      ::clock_gettime(clock, &spent) != 0)
    return 0;
  return static_cast<double>(spent.tv_sec) + static_cast<double>(spent.tv_nsec) * 1e-9;
}

}  // namespace belljar
