#pragma once
// The connection info a remote kernel sends back to the gateway that launched it (Jupyter
// Enterprise Gateway's and gateway_provisioners' "payload version 1"): the ports, the HMAC key
// and the comm port, encrypted so that only the gateway can read them on their way over the
// cluster network. The info is AES-128-ECB (PKCS#7 padding) under a fresh random key; that key
// is wrapped with RSA PKCS#1 v1.5 under the public key the gateway put on our command line;
// both go base64 into a JSON envelope {"version": 1, "key", "conn_info"}, itself base64.
// Whoever holds the key can drive the kernel, so it goes nowhere else: not the sandbox, not the
// log, not a file.
#include <openssl/evp.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace belljar {

struct EvpKeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using GatewayPublicKey = std::unique_ptr<EVP_PKEY, EvpKeyFree>;

// The gateway's key as it passes it: base64 of the DER SubjectPublicKeyInfo with the PEM
// armour stripped (a full PEM block is taken too). Throws UsageError naming --public-key when
// it is not base64, not a public key, or not RSA.
GatewayPublicKey parse_gateway_public_key(const std::string& text);

// The bytes to send to the gateway's response address for `connection_info`.
std::string seal_connection_info(const nlohmann::json& connection_info,
                                 const GatewayPublicKey& key);

}  // namespace belljar
