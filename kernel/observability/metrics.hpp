#pragma once
// Prometheus text-format metrics, kept current in a file for node_exporter's textfile
// collector. Rewritten whole (a fresh temporary file renamed over it: host_files.hpp), so a
// scrape never sees a half-written file. Events mark it changed; it is written at most once a
// second (the sandbox decides how many egress decisions there are), at the end of each cell
// (so a reply's facts are in it) and at shutdown.
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "kernel/observability/cell_states.hpp"
#include "kernel/observability/host_files.hpp"

namespace belljar {

class Metrics {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kMinInterval{1};

  // Opens the file's directory now: a bad path fails the start (UsageError naming --metrics).
  explicit Metrics(const std::string& path)
      : file_(path.empty() ? ReplacedFile() : ReplacedFile("--metrics", path)) {}
  bool enabled() const { return file_.enabled(); }

  void cell(CellStatus status, double seconds, bool truncated, LimitHit limit);
  void egress(bool allowed);
  // Connections the egress proxy answered unread, past its refusal budget.
  void egress_refused_unread(uint64_t count);
  // A request to a host with a bound secret (NAME, never the value), and a model's tokens.
  void secret_use(const std::string& secret, bool injected);
  void model_tokens(uint64_t input, uint64_t output);
  void restart();
  void audit_write_failed();       // an audit record that could not be written (audit_log.hpp)
  void limit_hit(LimitHit limit);  // a limit that stopped the session between cells
  // Writes the file if it changed and the last write is old enough (or at once, when `now_due`
  // is set: a cell's end, shutdown). No-op when disabled.
  void flush(Clock::time_point now, bool at_once = false);
  // When a pending change is due to be written.
  std::optional<Clock::time_point> due() const;

 private:
  static constexpr std::array<double, 10> kBuckets = {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300};
  std::string render() const;

  ReplacedFile file_;
  bool dirty_ = true;  // the first flush writes the zeros
  Clock::time_point written_{};
  std::array<uint64_t, kCellStatuses.size()> cells_by_status_{};
  std::array<uint64_t, kLimitsHit.size() + 1> limit_hits_{};  // by LimitHit, none unused
  std::array<uint64_t, kBuckets.size()> bucket_counts_{};
  uint64_t duration_count_ = 0;
  double duration_sum_ = 0;
  uint64_t egress_allowed_ = 0, egress_denied_ = 0, restarts_ = 0, truncations_ = 0;
  uint64_t egress_refused_unread_ = 0;
  uint64_t audit_write_failures_ = 0;
  std::map<std::pair<std::string, bool>, uint64_t> secret_uses_;  // (NAME, injected)
  uint64_t input_tokens_ = 0, output_tokens_ = 0;
};

}  // namespace belljar
