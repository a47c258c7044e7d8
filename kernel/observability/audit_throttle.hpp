#pragma once
// Egress decisions in the audit log, aggregated per interval. The sandbox decides how many
// decisions there are: a loop of denied requests wrote 31k records (21.8 MB) in seconds, enough
// to fill a disk or bury a real event. Per interval (a minute from the first decision), each
// destination's first decisions are recorded in full (`egress` records, as before), up to a
// total per interval; then one `egress_summary` counts every decision of the interval by
// decision and destination, so nothing goes unrecorded and the log grows at a bounded rate
// however fast the sandbox asks.
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

namespace belljar {

class EgressAuditThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    Clock::duration interval = std::chrono::seconds(60);
    uint64_t full_per_destination = 20;  // full records per decision and destination
    uint64_t full_per_interval = 200;    // full records in all
    size_t destinations = 1000;          // counted one by one; the rest as "other"
  };

  explicit EgressAuditThrottle(Limits limits) : limits_(limits) {}
  EgressAuditThrottle() : EgressAuditThrottle(Limits{}) {}

  // Counts the decision; true when its full record should be written.
  bool admit(const std::string& decision, const std::string& destination, Clock::time_point now);
  // Decisions the proxy could not queue (DecisionQueue::Taken::dropped), counted too.
  void dropped(uint64_t count, Clock::time_point now);
  // Connections the proxy answered unread, past its refusal budget (refusal_budget.hpp): each
  // is a decision not queued, counted in `not_queued`, and of those in `refused_unread`.
  void refused_unread(uint64_t count, Clock::time_point now);
  // When the current interval's summary is due, if one is open.
  std::optional<Clock::time_point> due() const;
  // The summary of the interval once it is over (or now, when `final`: at shutdown); the
  // next decision opens a new interval.
  std::optional<nlohmann::json> take_summary(Clock::time_point now, bool final);

 private:
  void open(Clock::time_point now);

  Limits limits_;
  std::optional<Clock::time_point> started_;
  struct Tally {
    uint64_t count = 0, recorded = 0;
  };
  std::map<std::pair<std::string, std::string>, Tally> counts_;  // (decision, destination)
  std::map<std::string, Tally> other_;  // per decision, past the destinations bound
  uint64_t total_ = 0, recorded_ = 0, dropped_ = 0, refused_unread_ = 0;
};

}  // namespace belljar
