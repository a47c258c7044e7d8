#pragma once
// The egress proxy's decisions: one per request, made on the proxy's thread and handed to the
// supervisor's reactor (kernel/session/egress_link.cpp), which writes the audit log and the
// metrics from them. The queue between the two is bounded: a sandbox that opens connections
// in a loop can make the proxy drop decisions (it counts them), never grow without bound.
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "sandbox/os/fd.hpp"

namespace belljar {

struct EgressDecision {
  std::string method;  // CONNECT, GET, ... ("" when no request could be read)
  std::string host;    // as requested, normalised when it could be
  uint16_t port = 0;
  std::string
      decision;      // "allowed", "denied" (the policy said no) or "failed" (it could not be done)
  std::string rule;  // the rule that allowed the host: "--allow-net example.com"; "" for none
  // A short code: not-allowlisted, port-not-allowed, private-address, bad-request,
  // sni-mismatch, sni-missing (denied);
  // resolve-failed, connect-failed, timeout, too-many-connections (failed); "" when allowed.
  std::string reason;
  std::string detail;   // one sentence for humans (the 403/502 body)
  std::string address;  // the address connected to, or refused
};

// Thread-safe: the proxy's thread posts, the reactor's takes.
class DecisionQueue {
 public:
  explicit DecisionQueue(size_t max_queued);
  void post(EgressDecision decision);
  // Readable (an eventfd) while decisions are waiting.
  int fd() const { return event_.get(); }
  struct Taken {
    std::vector<EgressDecision> items;
    uint64_t dropped = 0;  // decisions that found the queue full since the last take
  };
  Taken take();

 private:
  std::mutex mutex_;
  std::deque<EgressDecision> queued_;
  uint64_t dropped_ = 0;
  size_t max_queued_;
  Fd event_;
};

}  // namespace belljar
