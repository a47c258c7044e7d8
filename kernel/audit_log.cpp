#include "kernel/audit_log.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernel/bounded_json.hpp"
#include "kernel/wire_message.hpp"
#include "sandbox/policy.hpp"

namespace belljar {

AuditLog::AuditLog(const std::string& path) {
  if (path.empty()) return;
  file_.reset(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
  if (!file_) throw UsageError("--audit-log " + path + ": " + std::strerror(errno));
  fd_ = file_.get();
}

void AuditLog::record(const std::string& event, nlohmann::json fields) {
  nlohmann::json line = {{"ts", iso8601_now()}, {"event", event}};
  for (auto& [key, value] : fields.items()) line[key] = value;
  std::string text = dump_json(line) + "\n";
  ssize_t ignored = ::write(fd_, text.data(), text.size());
  (void)ignored;
}

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace belljar
