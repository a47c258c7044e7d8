#include "kernel/observability/audit_throttle.hpp"

#include <cmath>

namespace belljar {

void EgressAuditThrottle::open(Clock::time_point now) {
  if (!started_) started_ = now;
}

bool EgressAuditThrottle::admit(const std::string& decision, const std::string& destination,
                                Clock::time_point now) {
  open(now);
  ++total_;
  auto key = std::make_pair(decision, destination);
  auto it = counts_.find(key);
  if (it == counts_.end()) {
    if (counts_.size() >= limits_.destinations) {
      // Past the bound on distinct destinations (random host names), counted together.
      ++other_[decision].count;
      return false;
    }
    it = counts_.emplace(key, Tally{}).first;
  }
  auto& [count, recorded] = it->second;
  ++count;
  if (recorded >= limits_.full_per_destination || recorded_ >= limits_.full_per_interval)
    return false;
  ++recorded, ++recorded_;
  return true;
}

void EgressAuditThrottle::dropped(uint64_t count, Clock::time_point now) {
  if (count == 0) return;
  open(now);
  dropped_ += count;
}

void EgressAuditThrottle::refused_unread(uint64_t count, Clock::time_point now) {
  dropped(count, now);
  refused_unread_ += count;
}

std::optional<EgressAuditThrottle::Clock::time_point> EgressAuditThrottle::due() const {
  if (!started_) return std::nullopt;
  return *started_ + limits_.interval;
}

std::optional<nlohmann::json> EgressAuditThrottle::take_summary(Clock::time_point now, bool final) {
  if (!started_ || (!final && now < *started_ + limits_.interval)) return std::nullopt;
  nlohmann::json destinations = nlohmann::json::array();
  for (const auto& [key, value] : counts_)
    destinations.push_back({{"decision", key.first},
                            {"destination", key.second},
                            {"count", value.count},
                            {"recorded", value.recorded}});
  nlohmann::json other = nlohmann::json::object();
  for (const auto& [decision, value] : other_) other[decision] = {{"count", value.count}};
  double seconds = std::chrono::duration<double>(now - *started_).count();
  nlohmann::json summary = {{"interval_seconds", std::round(seconds * 10) / 10},
                            {"decisions", total_},
                            {"recorded", recorded_},
                            {"not_recorded", total_ - recorded_},
                            {"not_queued", dropped_},
                            {"refused_unread", refused_unread_},
                            {"by_destination", std::move(destinations)},
                            {"other_destinations", std::move(other)}};
  started_.reset();
  counts_.clear();
  other_.clear();
  total_ = recorded_ = dropped_ = refused_unread_ = 0;
  return summary;
}

}  // namespace belljar
