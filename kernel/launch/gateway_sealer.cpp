#include "kernel/launch/gateway_sealer.hpp"

#include "sandbox/os/installed_file.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

std::shared_ptr<const PayloadSealer> load_gateway_sealer(const std::string& module_path,
                                                         const std::string& public_key_text) {
  Fd file = open_installed_file(module_path, "the gateway module", InstalledKind::module);
  auto entry = reinterpret_cast<GatewayEntryPoint>(
      load_module_symbol(file, "the gateway module " + module_path, kGatewayEntryPoint));
  std::string error;
  std::shared_ptr<const PayloadSealer> sealer(entry(public_key_text, error));
  if (!sealer) throw UsageError(error);
  return sealer;
}

}  // namespace belljar
