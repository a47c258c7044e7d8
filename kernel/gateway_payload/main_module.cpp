// belljar-gateway.so's entry point: gateway_payload.hpp behind the interface `belljar launch`
// holds (payload_sealer.hpp). Everything else in the module is hidden (-fvisibility=hidden,
// --exclude-libs): it neither exports nor interposes anything.
#include <openssl/crypto.h>

#include <type_traits>

#include "kernel/gateway_payload/gateway_payload.hpp"
#include "kernel/gateway_payload/payload_sealer.hpp"
#include "sandbox/os/installed_file.hpp"

namespace belljar {
namespace {

class RsaSealer final : public PayloadSealer {
 public:
  explicit RsaSealer(GatewayPublicKey key) : key_(std::move(key)) {}
  std::string seal(const std::string& connection_info_json) const override {
    return seal_connection_info(nlohmann::json::parse(connection_info_json), key_);
  }

 private:
  GatewayPublicKey key_;
};

}  // namespace
}  // namespace belljar

extern "C" __attribute__((visibility("default"))) belljar::PayloadSealer* belljar_gateway_sealer(
    const std::string& public_key_text, std::string& error) {
  // Before any other OpenSSL call in the process (`belljar launch` loads this module before the
  // egress proxy's): no configuration file, whatever OPENSSL_CONF says. OpenSSL loads one once per
  // process, so the first module to start it decides for both.
  if (OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) != 1) {
    error = "OpenSSL could not be initialised";
    return nullptr;
  }
  return belljar::made_or_null(
      [&] { return new belljar::RsaSealer(belljar::parse_gateway_public_key(public_key_text)); },
      error);
}
static_assert(std::is_same_v<decltype(&belljar_gateway_sealer), belljar::GatewayEntryPoint>,
              "the entry point's type is the one payload_sealer.hpp names");
