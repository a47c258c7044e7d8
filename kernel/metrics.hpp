#pragma once
// Prometheus text-format metrics, kept current in a file for node_exporter's textfile
// collector. Rewritten whole (temp file + rename) after each event, so a scrape never sees a
// half-written file.
#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace belljar {

class Metrics {
 public:
  explicit Metrics(std::string path) : path_(std::move(path)) {}
  bool enabled() const { return !path_.empty(); }

  void cell(const std::string& status, double seconds, bool truncated, const std::string& limit_hit);
  void egress(bool allowed);
  void restart();
  void write() const;  // no-op when disabled

 private:
  static constexpr std::array<double, 10> kBuckets = {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300};
  std::string path_;
  std::map<std::string, uint64_t> cells_by_status_;
  std::map<std::string, uint64_t> limit_hits_;
  std::array<uint64_t, kBuckets.size()> bucket_counts_{};
  uint64_t duration_count_ = 0;
  double duration_sum_ = 0;
  uint64_t egress_allowed_ = 0, egress_denied_ = 0, restarts_ = 0, truncations_ = 0;
};

}  // namespace belljar
