// The connection info sealed for the gateway: only the private half of the gateway's key opens
// it, and what comes out is the JSON that went in. Decoded here step by step as the gateways'
// response managers do (base64 JSON envelope, RSA PKCS#1 v1.5, AES-128-ECB, PKCS#7).
#include "kernel/gateway_payload/gateway_payload.hpp"

#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <catch2/catch.hpp>
#include <memory>

#include "kernel/protocol/base64.hpp"
#include "usage_error.hpp"

using namespace belljar;

namespace {

struct GatewayKey {
  GatewayPublicKey pair;
  std::string public_text;  // base64 DER, as the gateway passes it
};

GatewayKey make_rsa_key(int bits = 1024) {
  GatewayKey key;
  key.pair.reset(EVP_RSA_gen(static_cast<unsigned>(bits)));
  REQUIRE(key.pair);
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(key.pair.get(), &der);
  REQUIRE(n > 0);
  key.public_text =
      base64_encode(std::string(reinterpret_cast<char*>(der), static_cast<size_t>(n)));
  OPENSSL_free(der);
  return key;
}

std::string rsa_decrypt(const GatewayPublicKey& pair, const std::string& wrapped) {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new(pair.get(), nullptr), EVP_PKEY_CTX_free);
  REQUIRE(EVP_PKEY_decrypt_init(ctx.get()) == 1);
  REQUIRE(EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_PADDING) == 1);
  size_t size = 0;
  const auto* in = reinterpret_cast<const unsigned char*>(wrapped.data());
  REQUIRE(EVP_PKEY_decrypt(ctx.get(), nullptr, &size, in, wrapped.size()) == 1);
  std::string out(size, '\0');
  if (EVP_PKEY_decrypt(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &size, in,
                       wrapped.size()) != 1)
    return "";
  out.resize(size);
  return out;
}

std::string aes_ecb_decrypt(const std::string& key, const std::string& sealed) {
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(),
                                                                      EVP_CIPHER_CTX_free);
  std::string out(sealed.size() + 16, '\0');
  int n = 0, last = 0;
  REQUIRE(EVP_DecryptInit_ex(ctx.get(), EVP_aes_128_ecb(), nullptr,
                             reinterpret_cast<const unsigned char*>(key.data()), nullptr) == 1);
  REQUIRE(EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &n,
                            reinterpret_cast<const unsigned char*>(sealed.data()),
                            static_cast<int>(sealed.size())) == 1);
  REQUIRE(EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(out.data()) + n,
                              &last) == 1);  // the PKCS#7 padding is checked and removed here
  out.resize(static_cast<size_t>(n + last));
  return out;
}

}  // namespace

TEST_CASE("the sealed connection info opens with the gateway's private key", "[launch]") {
  GatewayKey key = make_rsa_key();
  nlohmann::json info = {{"shell_port", 40001}, {"key", "a-uuid-key"}, {"kernel_id", "k-1"}};
  std::string payload = seal_connection_info(info, parse_gateway_public_key(key.public_text));

  auto envelope_text = base64_decode(payload);
  REQUIRE(envelope_text);
  auto envelope = nlohmann::json::parse(*envelope_text);
  CHECK(envelope["version"] == 1);  // an integer, as the gateway compares it
  auto wrapped = base64_decode(envelope["key"].get<std::string>());
  REQUIRE(wrapped);
  CHECK(wrapped->size() == 128);  // one RSA-1024 block
  std::string aes_key = rsa_decrypt(key.pair, *wrapped);
  REQUIRE(aes_key.size() == 16);  // AES-128
  auto sealed = base64_decode(envelope["conn_info"].get<std::string>());
  REQUIRE(sealed);
  CHECK(sealed->size() % 16 == 0);
  CHECK(nlohmann::json::parse(aes_ecb_decrypt(aes_key, *sealed)) == info);
  // Nothing of the info is readable in the payload.
  CHECK(payload.find("a-uuid-key") == std::string::npos);
  CHECK(envelope_text->find("a-uuid-key") == std::string::npos);

  SECTION("each payload has its own AES key") {
    std::string again = seal_connection_info(info, parse_gateway_public_key(key.public_text));
    CHECK(again != payload);
  }
  SECTION("another key pair opens nothing") {
    GatewayKey other = make_rsa_key();
    CHECK(rsa_decrypt(other.pair, *wrapped).size() != 16);
  }
}

TEST_CASE("the gateway's public key: base64 DER, or a PEM block, RSA only", "[launch]") {
  GatewayKey key = make_rsa_key();
  CHECK(parse_gateway_public_key(key.public_text));
  std::string pem = "-----BEGIN PUBLIC KEY-----\n";
  for (size_t i = 0; i < key.public_text.size(); i += 64)
    pem += key.public_text.substr(i, 64) + "\n";
  pem += "-----END PUBLIC KEY-----\n";
  CHECK(parse_gateway_public_key(pem));

  using belljar::testing::usage_error;
  CHECK(usage_error([] { parse_gateway_public_key(""); }).find("--public-key: empty") == 0);
  CHECK(usage_error([] { parse_gateway_public_key("@@@"); }) ==
        "--public-key: not base64 (expected the gateway's RSA public key)");
  CHECK(usage_error([] {
          parse_gateway_public_key(base64_encode("hello world"));
        }).find("--public-key: not a public key") == 0);
  GatewayPublicKey ec(EVP_EC_gen("P-256"));
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(ec.get(), &der);
  std::string ec_text =
      base64_encode(std::string(reinterpret_cast<char*>(der), static_cast<size_t>(n)));
  OPENSSL_free(der);
  CHECK(usage_error([&] { parse_gateway_public_key(ec_text); }) == "--public-key: not an RSA key");
  GatewayKey weak = make_rsa_key(512);
  CHECK(usage_error([&] {
          parse_gateway_public_key(weak.public_text);
        }).find("too weak (1024 at least)") != std::string::npos);
}
