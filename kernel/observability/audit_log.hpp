#pragma once
// The audit log: one JSON object per line, appended and flushed per record (O_APPEND, one
// write), so an operator can tail it and a crash loses nothing already logged.
// Never the key, a secret or the code itself (only its hash and size) unless asked.
// Opened once, never through a symlink, and never where the sandbox can write: where it goes is
// audit_destination.hpp's to decide (by default a file per kernel in the user's state directory).
// A record that can't be written (a full disk, a file-size limit, a closed stderr) is never lost
// silently: a short write is continued, EINTR retried, and a failure is counted (the metrics'
// belljar_audit_write_failures_total), said on stderr (rate-limited), in the banner and in
// %audit. The kernel keeps running unless --audit-required, which refuses cells from then on.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kernel/observability/audit_destination.hpp"
#include "kernel/observability/diagnostics.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

class Metrics;

// What a part of the kernel may do with the audit log (kernel/session/doors.hpp): add a record,
// and know whether records are being lost. A part's unit test gives it a fake of this.
class AuditRecords {
 public:
  virtual ~AuditRecords() = default;
  // False when the record could not be written whole.
  virtual bool record(const std::string& event, nlohmann::json fields) = 0;
  virtual uint64_t failures() const = 0;
  // The last failure: "write(audit.jsonl) after 120 of 310 bytes: File too large"; empty if none.
  virtual const std::string& last_failure() const = 0;
  // "2 audit record(s) could not be written (the last: ...)", as the banner, %audit and the
  // refusals of --audit-required say it.
  std::string failure_text() const;
};

class AuditLog final : public AuditRecords {
 public:
  explicit AuditLog(AuditDestination destination);
  // Where the records go, as the banner says it: a path, or "stderr".
  const std::string& destination() const { return name_; }
  // Why the records are on stderr and not in the state directory; empty when they are not.
  const std::string& fallback() const { return fallback_; }
  // Every record names the kernel it came from, so records of one kernel can be joined.
  void set_kernel(std::string kernel_id) { kernel_id_ = std::move(kernel_id); }
  // Failures are counted there too (it must outlive this log).
  void count_failures_in(Metrics* metrics) { metrics_ = metrics; }
  bool record(const std::string& event, nlohmann::json fields) override;
  uint64_t failures() const override { return failures_; }
  const std::string& last_failure() const override { return last_failure_; }

 private:
  Fd file_;
  int fd_ = 2;
  std::string name_;  // the file as the banner and a failure name it
  std::string fallback_;
  std::string kernel_id_;
  Metrics* metrics_ = nullptr;
  uint64_t failures_ = 0;
  bool torn_ = false;  // the last line in the file is a record cut short
  std::string last_failure_;
  RateLimitedLog failure_log_{5};
};

}  // namespace belljar
