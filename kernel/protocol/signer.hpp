#pragma once
// HMAC-SHA256 over the four JSON parts of a wire message, as jupyter_client's Session does.
// Built on OpenSSL's SHA-256 compression directly: the EVP/provider machinery would load
// and touch megabytes of libcrypto in a process whose budget is 10 MB resident.
#include <openssl/sha.h>

#include <array>
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
  // SHA-256 states after absorbing (key ^ ipad) and (key ^ opad): each message resumes them.
  SHA256_CTX inner_{}, outer_{};
};

// Lower-case hex SHA-256 of data (the audit log's code hash).
std::string sha256_hex(std::string_view data);

}  // namespace belljar
