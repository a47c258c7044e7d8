#include "sandbox/egress/egress_resolver.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace belljar {

Resolution system_resolve(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  Resolution result;
  int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &list);
  if (rc != 0) {
    result.error = rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc);
    return result;
  }
  for (addrinfo* ai = list; ai && result.addresses.size() < 16; ai = ai->ai_next) {
    IpAddress address;
    if (ai->ai_family == AF_INET) {
      address.family = AF_INET;
      std::memcpy(address.bytes.data(), &reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr, 4);
    } else if (ai->ai_family == AF_INET6) {
      address.family = AF_INET6;
      std::memcpy(address.bytes.data(), &reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr,
                  16);
    } else {
      continue;
    }
    bool seen = false;
    for (const auto& a : result.addresses) seen = seen || a == address;
    if (!seen) result.addresses.push_back(address);
  }
  ::freeaddrinfo(list);
  if (result.addresses.empty()) result.error = "no IPv4 or IPv6 address";
  return result;
}

struct ResolverPool::Shared {
  NameResolver resolve;
  Done done;
  size_t max_queued = 0;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::pair<uint64_t, std::string>> queue;
  bool stopping = false;
  // Held while `done` runs, so the destructor can wait out a callback in flight.
  std::mutex done_mutex;
  bool done_closed = false;

  void work() {
    for (;;) {
      std::pair<uint64_t, std::string> job;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stopping || !queue.empty(); });
        if (stopping) return;
        job = std::move(queue.front());
        queue.pop_front();
      }
      Resolution result;
      try {
        result = resolve(job.second);
      } catch (const std::exception& e) {
        result.error = e.what();
      }
      std::lock_guard lock(done_mutex);
      if (!done_closed) done(job.first, std::move(result));
    }
  }
};

ResolverPool::ResolverPool(size_t threads, size_t max_queued, NameResolver resolve, Done done)
    : shared_(std::make_shared<Shared>()) {
  shared_->resolve = std::move(resolve);
  shared_->done = std::move(done);
  shared_->max_queued = max_queued;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  for (size_t i = 0; i < threads; ++i) {
    try {
      std::thread([shared = shared_] { shared->work(); }).detach();
    } catch (...) {
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      throw;
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

ResolverPool::~ResolverPool() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
    shared_->queue.clear();
  }
  shared_->wake.notify_all();
  std::lock_guard lock(shared_->done_mutex);
  shared_->done_closed = true;
}

bool ResolverPool::submit(uint64_t job, std::string name) {
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->queue.size() >= shared_->max_queued) return false;
    shared_->queue.emplace_back(job, std::move(name));
  }
  shared_->wake.notify_one();
  return true;
}

}  // namespace belljar
