#pragma once
// Name resolution for the egress proxy. getaddrinfo() blocks (for seconds, when a resolver is
// slow), and the proxy's loop must never block: a few threads of their own resolve, a bounded
// queue feeds them, and each answer comes back through a callback.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/egress_api/address_policy.hpp"

namespace belljar {

struct Resolution {
  std::vector<IpAddress> addresses;  // in the resolver's preferred order; empty on failure
  std::string error;                 // why there are none ("Name or service not known")
};

// The host's resolver (getaddrinfo, TCP, any family). Tests substitute their own.
using NameResolver = std::function<Resolution(const std::string& name)>;
Resolution system_resolve(const std::string& name);

class ResolverPool {
 public:
  using Done = std::function<void(uint64_t job, Resolution result)>;
  // `done` runs on a resolver thread. Threads start with every signal blocked.
  ResolverPool(size_t threads, size_t max_queued, NameResolver resolve, Done done);
  // Threads still inside a slow getaddrinfo() are left to finish on their own (they only touch
  // state they share with the pool); none runs `done` after this returns.
  ~ResolverPool();
  ResolverPool(const ResolverPool&) = delete;
  ResolverPool& operator=(const ResolverPool&) = delete;

  // False when the queue is full: the caller answers 503 rather than queue without bound.
  bool submit(uint64_t job, std::string name);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace belljar
