#include "kernel/observability/audit_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernel/observability/metrics.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

std::string AuditRecords::failure_text() const {
  return std::to_string(failures()) +
         " audit record(s) could not be written (the last: " + last_failure() + ")";
}

AuditLog::AuditLog(AuditDestination destination)
    : file_(std::move(destination.file)),
      fd_(file_ ? file_.get() : STDERR_FILENO),
      name_(std::move(destination.name)),
      fallback_(std::move(destination.fallback)) {}

bool AuditLog::record(const std::string& event, nlohmann::json fields) {
  nlohmann::json line = {{"ts", iso8601_now()}, {"event", event}};
  if (!kernel_id_.empty()) line["kernel"] = kernel_id_;
  for (auto& [key, value] : fields.items()) line[key] = value;
  // After a record cut short, a newline first: the next record starts a line of its own.
  std::string text = (torn_ ? "\n" : "") + dump_json(line) + "\n";
  // One write in the usual case; a short one (a signal, a file-size limit reached mid-record)
  // is continued, so a record is whole or its failure is known.
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd_, text.data() + written, text.size() - written);
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    torn_ = written > 0 || torn_;
    int error = n < 0 ? errno : EIO;  // 0 bytes for a non-empty write: nothing will go
    last_failure_ = "write(" + name_ + ") of the " + event + " record" +
                    (written > 0 ? " after " + std::to_string(written) + " of " +
                                       std::to_string(text.size()) + " bytes"
                                 : "") +
                    ": " + std::strerror(error);
    ++failures_;
    if (metrics_) metrics_->audit_write_failed();
    failure_log_.log("audit record lost", last_failure_);
    return false;
  }
  torn_ = false;
  return true;
}

}  // namespace belljar
