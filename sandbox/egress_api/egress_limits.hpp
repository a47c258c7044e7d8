#pragma once
// The egress proxy's bounds. The threat is a sandbox (or an upstream) that holds connections,
// sends slowly or never reads: every resource a connection takes is capped and every phase has
// a deadline, so no client can exhaust the supervisor or stall another connection.
#include <chrono>
#include <cstddef>

namespace belljar {

struct EgressLimits {
  size_t max_connections = 256;                    // then 503
  size_t buffer_bytes = 64 * 1024;                 // per connection, each way
  size_t max_head_bytes = 16 * 1024;               // a request head larger than this gets 431
  std::chrono::milliseconds head_timeout{30'000};  // to send a whole request head
  std::chrono::milliseconds resolve_timeout{10'000};
  std::chrono::milliseconds connect_timeout{10'000};  // per address tried
  std::chrono::milliseconds idle_timeout{300'000};    // no byte either way
  std::chrono::milliseconds answer_timeout{5'000};    // to deliver the proxy's own response
  // A tunnel to a name: its TLS ClientHello must arrive within these before a byte goes on.
  std::chrono::milliseconds hello_timeout{10'000};
  size_t max_hello_bytes = 16384;
  size_t max_spliced = 128;  // bulk directions moved by splice(), two descriptors each
  size_t resolver_threads = 4;
  size_t max_queued_decisions = 10'000;  // the kernel drains them; past this they are counted
  // Refusals (the proxy's own 403/502/..., each a parsed head, a decision, an audit record)
  // cost the supervisor more than the sandbox's connect costs the cell. Past this burst, at
  // this rate, a connection gets a fixed 403 unread and is only counted (refusal_budget.hpp).
  double refusal_burst = 200;
  double refusals_per_second = 20;
};

}  // namespace belljar
