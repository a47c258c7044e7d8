#pragma once
// The audit log: one JSON object per line, appended and flushed per record (O_APPEND, one
// write), so an operator can tail it and a crash loses nothing already logged.
// Never the key, a secret or the code itself (only its hash and size) unless asked.
#include <string>

#include <nlohmann/json.hpp>

#include "sandbox/fd.hpp"

namespace belljar {

class AuditLog {
 public:
  // Empty path: the kernel's stderr. Throws UsageError when the file can't be opened.
  explicit AuditLog(const std::string& path);
  void record(const std::string& event, nlohmann::json fields);

 private:
  Fd file_;
  int fd_ = 2;
};

}  // namespace belljar
