#include "kernel/observability/metrics.hpp"

#include <sstream>

#include "kernel/observability/diagnostics.hpp"

namespace belljar {

void Metrics::cell(CellStatus status, double seconds, bool truncated, LimitHit limit) {
  ++cells_by_status_[static_cast<size_t>(status)];
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++bucket_counts_[i];
  ++duration_count_;
  duration_sum_ += seconds;
  if (truncated) ++truncations_;
  if (limit != LimitHit::none) ++limit_hits_[static_cast<size_t>(limit)];
  dirty_ = true;
}

void Metrics::secret_use(const std::string& secret, bool injected) {
  ++secret_uses_[{secret, injected}];
  dirty_ = true;
}

void Metrics::model_tokens(uint64_t input, uint64_t output) {
  input_tokens_ += input;
  output_tokens_ += output;
  dirty_ = true;
}

void Metrics::egress(bool allowed) {
  ++(allowed ? egress_allowed_ : egress_denied_);
  dirty_ = true;
}

void Metrics::egress_refused_unread(uint64_t count) {
  egress_refused_unread_ += count;
  dirty_ = count > 0 || dirty_;
}

void Metrics::limit_hit(LimitHit limit) {
  ++limit_hits_[static_cast<size_t>(limit)];
  dirty_ = true;
}

void Metrics::audit_write_failed() {
  ++audit_write_failures_;
  dirty_ = true;
}

void Metrics::restart() {
  ++restarts_;
  dirty_ = true;
}

std::optional<Metrics::Clock::time_point> Metrics::due() const {
  if (!enabled() || !dirty_) return std::nullopt;
  return written_ + kMinInterval;
}

void Metrics::flush(Clock::time_point now, bool at_once) {
  if (!enabled() || !dirty_ || (!at_once && now < written_ + kMinInterval)) return;
  dirty_ = false;
  written_ = now;
  std::string why;
  if (!file_.replace(render(), &why)) log_line("--metrics: " + why);
}

std::string Metrics::render() const {
  std::ostringstream out;
  out << "# HELP belljar_cells_total Cells executed, by final status.\n"
      << "# TYPE belljar_cells_total counter\n";
  for (CellStatus status : kCellStatuses)
    out << "belljar_cells_total{status=\"" << status_name(status) << "\"} "
        << cells_by_status_[static_cast<size_t>(status)] << "\n";
  out << "# HELP belljar_cell_duration_seconds Wall-clock time of cells.\n"
      << "# TYPE belljar_cell_duration_seconds histogram\n";
  for (size_t i = 0; i < kBuckets.size(); ++i)
    out << "belljar_cell_duration_seconds_bucket{le=\"" << kBuckets[i] << "\"} "
        << bucket_counts_[i] << "\n";
  out << "belljar_cell_duration_seconds_bucket{le=\"+Inf\"} " << duration_count_ << "\n"
      << "belljar_cell_duration_seconds_sum " << duration_sum_ << "\n"
      << "belljar_cell_duration_seconds_count " << duration_count_ << "\n"
      << "# HELP belljar_egress_requests_total Egress decisions of the proxy.\n"
      << "# TYPE belljar_egress_requests_total counter\n"
      << "belljar_egress_requests_total{decision=\"allowed\"} " << egress_allowed_ << "\n"
      << "belljar_egress_requests_total{decision=\"denied\"} " << egress_denied_ << "\n"
      << "# HELP belljar_egress_refused_unread_total Connections the egress proxy answered "
         "unread, past its budget of refusals.\n"
      << "# TYPE belljar_egress_refused_unread_total counter\n"
      << "belljar_egress_refused_unread_total " << egress_refused_unread_ << "\n"
      << "# HELP belljar_secret_requests_total Requests to hosts with a bound secret, by "
         "secret and whether its value was put in.\n"
      << "# TYPE belljar_secret_requests_total counter\n";
  // Names are variable names ([A-Za-z0-9_]): nothing to escape in a label.
  for (const auto& [key, count] : secret_uses_)
    out << "belljar_secret_requests_total{secret=\"" << key.first << "\",injected=\""
        << (key.second ? "true" : "false") << "\"} " << count << "\n";
  out << "# HELP belljar_model_tokens_total Tokens a model API reported in responses to "
         "requests with a bound secret.\n"
      << "# TYPE belljar_model_tokens_total counter\n"
      << "belljar_model_tokens_total{kind=\"input\"} " << input_tokens_ << "\n"
      << "belljar_model_tokens_total{kind=\"output\"} " << output_tokens_ << "\n"
      << "# HELP belljar_worker_restarts_total Sandboxed workers restarted.\n"
      << "# TYPE belljar_worker_restarts_total counter\n"
      << "belljar_worker_restarts_total " << restarts_ << "\n"
      << "# HELP belljar_audit_write_failures_total Audit records that could not be written.\n"
      << "# TYPE belljar_audit_write_failures_total counter\n"
      << "belljar_audit_write_failures_total " << audit_write_failures_ << "\n"
      << "# HELP belljar_output_truncations_total Cells whose output passed the cap.\n"
      << "# TYPE belljar_output_truncations_total counter\n"
      << "belljar_output_truncations_total " << truncations_ << "\n"
      << "# HELP belljar_limit_hits_total Cells stopped by a limit.\n"
      << "# TYPE belljar_limit_hits_total counter\n";
  for (LimitHit limit : kLimitsHit)
    out << "belljar_limit_hits_total{limit=\"" << limit_name(limit) << "\"} "
        << limit_hits_[static_cast<size_t>(limit)] << "\n";
  return out.str();
}

}  // namespace belljar
