#include "kernel/protocol/signer.hpp"

#include <stdexcept>

namespace belljar {

namespace {
// libsodium picks its implementations (and seeds its generator) once per process; safe to call
// again and from any thread.
void ensure_sodium() {
  if (::sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
}

std::string to_hex(const unsigned char* bytes, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string hex(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    hex[2 * i] = kHex[bytes[i] >> 4];
    hex[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return hex;
}
}  // namespace

Signer::Signer(std::string key) {
  ensure_sodium();
  // RFC 2104 (keys longer than the block hashed first) is libsodium's.
  crypto_auth_hmacsha256_init(&keyed_, reinterpret_cast<const unsigned char*>(key.data()),
                              key.size());
  ::sodium_memzero(key.data(), key.size());
}

Signer::~Signer() {
  ::sodium_memzero(&keyed_, sizeof keyed_);
}

std::string Signer::sign(const std::vector<std::string_view>& parts) const {
  crypto_auth_hmacsha256_state state = keyed_;
  for (auto part : parts)
    crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(part.data()),
                                  part.size());
  unsigned char digest[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&state, digest);
  ::sodium_memzero(&state, sizeof state);
  return to_hex(digest, sizeof digest);
}

bool Signer::verify(std::string_view signature, const std::vector<std::string_view>& parts) const {
  std::string expected = sign(parts);
  // Length is public (always 64); only the content comparison must not leak timing.
  if (signature.size() != expected.size()) return false;
  return ::sodium_memcmp(signature.data(), expected.data(), expected.size()) == 0;
}

std::string sha256_hex(std::string_view data) {
  ensure_sodium();
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  return to_hex(digest, sizeof digest);
}

}  // namespace belljar
