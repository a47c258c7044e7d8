#pragma once
// HMAC-SHA256 over the four JSON parts of a wire message, as jupyter_client's Session does.
#include <openssl/evp.h>

#include <memory>
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
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* keyed_ = nullptr;  // initialised once with the key; duplicated per message
};

}  // namespace belljar
