#include "kernel/gateway_payload/gateway_payload.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <stdexcept>

#include "kernel/protocol/base64.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

namespace {
struct EvpKeyContextFree {
  void operator()(EVP_PKEY_CTX* context) const { EVP_PKEY_CTX_free(context); }
};
struct EvpCipherContextFree {
  void operator()(EVP_CIPHER_CTX* context) const { EVP_CIPHER_CTX_free(context); }
};

// The base64 body of a PEM block, or the text itself when it has no armour; line breaks and
// spaces (a key pasted across lines) are dropped.
std::string key_body(const std::string& text) {
  std::string body;
  for (size_t at = 0; at < text.size();) {
    if (text.compare(at, 5, "-----") == 0) {  // "-----BEGIN PUBLIC KEY-----": skip the label
      size_t end = text.find("-----", at + 5);
      if (end == std::string::npos) break;
      at = end + 5;
      continue;
    }
    char c = text[at++];
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') body += c;
  }
  return body;
}

std::string aes_128_ecb(const std::string& plain, const unsigned char (&key)[16]) {
  std::unique_ptr<EVP_CIPHER_CTX, EvpCipherContextFree> context(EVP_CIPHER_CTX_new());
  std::string sealed(plain.size() + 16, '\0');
  int written = 0, last = 0;
  // ECB, because that is what the gateway decodes; each payload has its own random key and is
  // sent once, so ECB's weakness (equal blocks under one key look equal) reveals little.
  if (!context ||
      EVP_EncryptInit_ex(context.get(), EVP_aes_128_ecb(), nullptr, key, nullptr) != 1 ||
      EVP_EncryptUpdate(context.get(), reinterpret_cast<unsigned char*>(sealed.data()), &written,
                        reinterpret_cast<const unsigned char*>(plain.data()),
                        static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(context.get(), reinterpret_cast<unsigned char*>(sealed.data()) + written,
                          &last) != 1)  // PKCS#7 padding is EVP's default
    throw std::runtime_error("AES-128-ECB encryption of the connection info failed");
  sealed.resize(static_cast<size_t>(written + last));
  return sealed;
}

std::string rsa_pkcs1_wrap(const unsigned char (&key)[16], const GatewayPublicKey& public_key) {
  std::unique_ptr<EVP_PKEY_CTX, EvpKeyContextFree> context(
      EVP_PKEY_CTX_new(public_key.get(), nullptr));
  size_t size = 0;
  if (!context || EVP_PKEY_encrypt_init(context.get()) != 1 ||
      EVP_PKEY_CTX_set_rsa_padding(context.get(), RSA_PKCS1_PADDING) != 1 ||
      EVP_PKEY_encrypt(context.get(), nullptr, &size, key, sizeof key) != 1)
    throw std::runtime_error("RSA encryption of the payload key failed");
  std::string wrapped(size, '\0');
  if (EVP_PKEY_encrypt(context.get(), reinterpret_cast<unsigned char*>(wrapped.data()), &size, key,
                       sizeof key) != 1)
    throw std::runtime_error("RSA encryption of the payload key failed");
  wrapped.resize(size);
  return wrapped;
}
}  // namespace

GatewayPublicKey parse_gateway_public_key(const std::string& text) {
  auto bad = [](const std::string& why) { return UsageError("--public-key: " + why); };
  if (text.empty()) throw bad("empty (the gateway passes its RSA public key here)");
  auto der = base64_decode(key_body(text));
  if (!der || der->empty()) throw bad("not base64 (expected the gateway's RSA public key)");
  const auto* bytes = reinterpret_cast<const unsigned char*>(der->data());
  GatewayPublicKey key(d2i_PUBKEY(nullptr, &bytes, static_cast<long>(der->size())));
  if (!key) throw bad("not a public key (expected a DER SubjectPublicKeyInfo, base64)");
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_RSA) throw bad("not an RSA key");
  if (EVP_PKEY_get_bits(key.get()) < 1024)
    throw bad("an RSA key of " + std::to_string(EVP_PKEY_get_bits(key.get())) +
              " bits is too weak (1024 at least)");
  return key;
}

std::string seal_connection_info(const nlohmann::json& connection_info,
                                 const GatewayPublicKey& key) {
  unsigned char aes_key[16];
  if (RAND_bytes(aes_key, sizeof aes_key) != 1)
    throw std::runtime_error("RAND_bytes failed: no randomness for the payload key");
  std::string sealed = aes_128_ecb(connection_info.dump(), aes_key);
  std::string wrapped = rsa_pkcs1_wrap(aes_key, key);
  OPENSSL_cleanse(aes_key, sizeof aes_key);
  nlohmann::json envelope = {
      {"version", 1}, {"key", base64_encode(wrapped)}, {"conn_info", base64_encode(sealed)}};
  return base64_encode(envelope.dump());
}

}  // namespace belljar
