#include "kernel/observability/observability.hpp"

#include <cstdlib>

#include "kernel/observability/audit_destination.hpp"
#include "kernel/observability/host_files.hpp"

namespace belljar {

Observability::Observability(const Policy& policy, const std::string& session_id)
    : metrics(refuse_sandbox_writable(policy, "--metrics", policy.metrics_file)),
      audit(open_audit_destination(policy, session_id,
                                   [](const char* name) { return std::getenv(name); })) {
  audit.count_failures_in(&metrics);
  // Once, before any record: the records on stderr are no surprise.
  if (!audit.fallback().empty()) log_line(fallback_warning(audit.fallback()));
}

}  // namespace belljar
