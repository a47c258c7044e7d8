#pragma once
// Loading the connection info's sealing (kernel/gateway_payload/payload_sealer.hpp) for
// `belljar launch`. The module is belljar-gateway.so, found from the kernel's own path like the
// jail helper (kernel/command_line/resources.cpp) and checked the same way
// (sandbox/os/installed_file.hpp).
#include <memory>
#include <string>

#include "kernel/gateway_payload/payload_sealer.hpp"

namespace belljar {

// A sealer for the gateway's public key (as the gateway passes it). Throws UsageError naming
// --public-key when the key is unfit, SetupError naming the module and the fix when the module
// is missing or unfit.
std::shared_ptr<const PayloadSealer> load_gateway_sealer(const std::string& module_path,
                                                         const std::string& public_key_text);

}  // namespace belljar
