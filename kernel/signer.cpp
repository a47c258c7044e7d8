#include "kernel/signer.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>

#include <stdexcept>

namespace belljar {

Signer::Signer(std::string key) {
  mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  keyed_ = mac_ ? EVP_MAC_CTX_new(mac_) : nullptr;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  if (!keyed_ ||
      !EVP_MAC_init(keyed_, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params))
    throw std::runtime_error("OpenSSL: cannot set up HMAC-SHA256");
  OPENSSL_cleanse(key.data(), key.size());
}

Signer::~Signer() {
  EVP_MAC_CTX_free(keyed_);
  EVP_MAC_free(mac_);
}

std::string Signer::sign(const std::vector<std::string_view>& parts) const {
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(keyed_);
  if (!ctx) throw std::runtime_error("OpenSSL: EVP_MAC_CTX_dup failed");
  unsigned char digest[EVP_MAX_MD_SIZE];
  size_t length = 0;
  bool ok = true;
  for (auto part : parts)
    ok = ok && EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(part.data()), part.size());
  ok = ok && EVP_MAC_final(ctx, digest, &length, sizeof digest);
  EVP_MAC_CTX_free(ctx);
  if (!ok) throw std::runtime_error("OpenSSL: HMAC computation failed");
  static const char kHex[] = "0123456789abcdef";
  std::string hex(length * 2, '0');
  for (size_t i = 0; i < length; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 15];
  }
  return hex;
}

bool Signer::verify(std::string_view signature, const std::vector<std::string_view>& parts) const {
  std::string expected = sign(parts);
  // Length is public (always 64); only the content comparison must not leak timing.
  if (signature.size() != expected.size()) return false;
  return CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) == 0;
}

}  // namespace belljar
