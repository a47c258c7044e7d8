// The low-level SHA256_* calls are deprecated in OpenSSL 3 in favour of EVP, whose provider
// set-up costs this process several resident megabytes; they remain supported.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "kernel/protocol/signer.hpp"

#include <openssl/crypto.h>

namespace belljar {

namespace {
constexpr size_t kBlock = 64;

// SHA-256 of `data` through the low-level calls. OpenSSL 3's one-shot SHA256() goes through
// EVP_Q_digest, which loads the default provider: about 2 MB resident in the supervisor the
// first time a cell's code is hashed for the audit log.
void sha256(std::string_view data, unsigned char digest[SHA256_DIGEST_LENGTH]) {
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, data.data(), data.size());
  SHA256_Final(digest, &ctx);
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
  // RFC 2104: keys longer than the block are hashed first, shorter ones zero-padded.
  std::array<unsigned char, kBlock> block{};
  if (key.size() > kBlock) {
    sha256(key, block.data());
  } else {
    std::copy(key.begin(), key.end(), block.begin());
  }
  std::array<unsigned char, kBlock> pad;
  for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x36;
  SHA256_Init(&inner_);
  SHA256_Update(&inner_, pad.data(), kBlock);
  for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x5c;
  SHA256_Init(&outer_);
  SHA256_Update(&outer_, pad.data(), kBlock);
  OPENSSL_cleanse(pad.data(), pad.size());
  OPENSSL_cleanse(block.data(), block.size());
  OPENSSL_cleanse(key.data(), key.size());
}

Signer::~Signer() {
  OPENSSL_cleanse(&inner_, sizeof inner_);
  OPENSSL_cleanse(&outer_, sizeof outer_);
}

std::string Signer::sign(const std::vector<std::string_view>& parts) const {
  SHA256_CTX ctx = inner_;
  for (auto part : parts) SHA256_Update(&ctx, part.data(), part.size());
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256_Final(digest, &ctx);
  ctx = outer_;
  SHA256_Update(&ctx, digest, sizeof digest);
  SHA256_Final(digest, &ctx);
  return to_hex(digest, sizeof digest);
}

bool Signer::verify(std::string_view signature, const std::vector<std::string_view>& parts) const {
  std::string expected = sign(parts);
  // Length is public (always 64); only the content comparison must not leak timing.
  if (signature.size() != expected.size()) return false;
  return CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) == 0;
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  sha256(data, digest);
  return to_hex(digest, sizeof digest);
}

}  // namespace belljar
