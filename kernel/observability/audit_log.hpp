#pragma once
// The audit log: one JSON object per line, appended and flushed per record (O_APPEND, one
// write), so an operator can tail it and a crash loses nothing already logged.
// Never the key, a secret or the code itself (only its hash and size) unless asked.
// Opened once, never through a symlink, and never where the sandbox can write (host_files.hpp).
#include <nlohmann/json.hpp>
#include <string>

#include "sandbox/os/fd.hpp"

namespace belljar {

class AuditLog {
 public:
  // Empty path: the kernel's stderr. Throws UsageError when the file can't be opened.
  explicit AuditLog(const std::string& path);
  // Every record names the kernel it came from, so records of one kernel can be joined.
  void set_kernel(std::string kernel_id) { kernel_id_ = std::move(kernel_id); }
  void record(const std::string& event, nlohmann::json fields);

 private:
  Fd file_;
  int fd_ = 2;
  std::string kernel_id_;
};

}  // namespace belljar
