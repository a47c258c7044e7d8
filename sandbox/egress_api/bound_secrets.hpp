#pragma once
// The values bound to hosts with --secret / --secret-file, as the supervisor holds them: read
// once at start, each with the placeholder the sandbox gets in its place.
//
// The threat is the sandbox learning a value. It is read here, outside the sandbox, and lives
// only in the supervisor's memory (not dumpable, in another pid namespace): never in the jail's
// environment, argv, files or the JailSpec, never in the audit log or the metrics. The sandbox
// holds `belljar-secret-NAME-<32 hex>`, random per session; the egress proxy swaps it for the
// value in requests to the bound host (brokered_http.hpp) and back in responses.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/egress_api/allowlist.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

struct BoundSecret {
  std::string name;
  std::string value;        // the real one
  std::string placeholder;  // what the sandbox holds instead
  std::vector<HostRule> hosts;
};

class BoundSecrets {
 public:
  // Reads each binding's value from `environment` (NAME=VALUE entries, the kernel's own) or its
  // file. Throws UsageError naming the binding when a variable is unset, a file unreadable, or a
  // value empty, shorter than 8 bytes or holding a control character (it could end a header
  // line: a value is put into headers).
  static std::shared_ptr<const BoundSecrets> load(const std::vector<SecretBinding>& bindings,
                                                  const char* const* environment);
  ~BoundSecrets();  // the values are wiped
  BoundSecrets(const BoundSecrets&) = delete;
  BoundSecrets& operator=(const BoundSecrets&) = delete;

  bool empty() const { return secrets_.empty(); }
  const std::vector<BoundSecret>& all() const { return secrets_; }
  // The secrets bound to HOST:PORT (none: the connection is not brokered).
  std::vector<const BoundSecret*> bound_to(const RequestHost& host, uint16_t port) const;
  // NAME=placeholder for the sandbox's environment.
  std::vector<std::pair<std::string, std::string>> placeholders() const;
  std::vector<std::string> values() const;  // for the output redactor

 private:
  BoundSecrets() = default;
  std::vector<BoundSecret> secrets_;
};

}  // namespace belljar
