#include "kernel/observability/audit_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernel/observability/host_files.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

AuditLog::AuditLog(const std::string& path) {
  if (path.empty()) return;
  file_ = open_append_only("--audit-log", path);
  fd_ = file_.get();
}

void AuditLog::record(const std::string& event, nlohmann::json fields) {
  nlohmann::json line = {{"ts", iso8601_now()}, {"event", event}};
  if (!kernel_id_.empty()) line["kernel"] = kernel_id_;
  for (auto& [key, value] : fields.items()) line[key] = value;
  std::string text = dump_json(line) + "\n";
  ssize_t ignored = ::write(fd_, text.data(), text.size());
  (void)ignored;
}

}  // namespace belljar
