#pragma once
// How many refusals the egress proxy spends its own work on. A refused connection costs the
// supervisor a passed descriptor, a parsed head, a decision, an audit record and a metric,
// about 1.7 times the CPU the sandbox spent to open it (20,000 denied CONNECTs: 4.4 s of the
// supervisor's against 2.6 s of the cell's), none of it charged to the cell's --cpu. So the
// refusals of a session draw on a token bucket (EgressLimits::refusal_burst, refilled at
// refusals_per_second); while it is empty, every new connection of the session is answered
// with one fixed 403 (X-Belljar-Denied: refusals-rate-limited) without reading a byte of it,
// and only counted (DecisionQueue::count_unread; the kernel logs the count in the audit
// summary and the metrics). A session that stops asking for what it may not have gets its
// budget back within seconds. The proxy serves one session (one kernel), so one bucket.
#include <algorithm>
#include <chrono>

namespace belljar {

class RefusalBudget {
 public:
  using Clock = std::chrono::steady_clock;
  RefusalBudget(double burst, double per_second)
      : burst_(burst), per_second_(per_second), tokens_(burst), at_(Clock::now()) {}

  // Is there a refusal left to spend on a new connection?
  bool available(Clock::time_point now) {
    refill(now);
    return tokens_ >= 1;
  }
  // A refusal was made (the proxy's own answer, with its decision).
  void spend(Clock::time_point now) {
    refill(now);
    tokens_ = std::max(0.0, tokens_ - 1);
  }

 private:
  void refill(Clock::time_point now) {
    double seconds = std::chrono::duration<double>(now - at_).count();
    tokens_ = std::min(burst_, tokens_ + seconds * per_second_);
    at_ = now;
  }

  double burst_, per_second_, tokens_;
  Clock::time_point at_;
};

}  // namespace belljar
