#pragma once
// Sealing the connection info for the gateway that launched the kernel (`belljar launch`), as
// the supervisor sees it. The sealing itself (gateway_payload.hpp: RSA and AES through OpenSSL)
// is built into a module of its own, belljar-gateway.so, loaded only by `belljar launch`
// (kernel/launch/gateway_sealer.hpp): no other kernel maps OpenSSL for it. This header is the
// whole interface between the two, and includes nothing of OpenSSL.
#include <string>

namespace belljar {

class PayloadSealer {
 public:
  virtual ~PayloadSealer() = default;
  // The bytes to send to the gateway's response address for the connection info (JSON text).
  virtual std::string seal(const std::string& connection_info_json) const = 0;
};

// The module's one entry point, looked up by name: a sealer for the gateway's public key as
// the gateway passes it, or null with `error` set to the reason ("--public-key: not an RSA
// key"). It never throws across the boundary.
inline constexpr const char* kGatewayEntryPoint = "belljar_gateway_sealer";
using GatewayEntryPoint = PayloadSealer* (*)(const std::string& public_key_text,
                                             std::string& error);

}  // namespace belljar
