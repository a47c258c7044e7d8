#pragma once
// HMAC-SHA256 over the four JSON parts of a wire message, as jupyter_client's Session does.
// Built on libsodium (which libzmq loads anyway for CURVE): OpenSSL's libcrypto would cost
// every kernel about 1 MB more resident, most of it its load-time relocations, in a process
// whose budget is 10 MB resident and 4 MB proportional. OpenSSL is loaded only by the modules
// that need TLS or RSA (sandbox/egress, kernel/gateway_payload).
#include <sodium.h>

#include <string>
#include <string_view>
#include <vector>

namespace belljar {

class Signer {
 public:
  explicit Signer(std::string key);
  ~Signer();
  Signer(const Signer&) = delete;
  Signer& operator=(const Signer&) = delete;

  // Lower-case hex digest of the parts concatenated.
  std::string sign(const std::vector<std::string_view>& parts) const;
  // Constant-time comparison against the expected digest.
  bool verify(std::string_view signature, const std::vector<std::string_view>& parts) const;

 private:
  // The HMAC state after absorbing the key (its inner and outer pads): each message resumes it.
  crypto_auth_hmacsha256_state keyed_{};
};

// Lower-case hex SHA-256 of data (the audit log's code hash).
std::string sha256_hex(std::string_view data);

}  // namespace belljar
