#pragma once
// What a gateway tells the kernel it launches (`belljar launch`): the kernel id it will know
// the kernel by, the ports it may listen on, where to send its connection info and the key to
// seal it with. Each comes from a flag, else from the variable the gateways' bootstrap scripts
// set (KERNEL_ID, PORT_RANGE or EG_PORT_RANGE, RESPONSE_ADDRESS or EG_RESPONSE_ADDRESS,
// PUBLIC_KEY or EG_PUBLIC_KEY); those variables are the launcher's, never the sandbox's (its
// environment is built from the allowlist).
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kernel/launch/gateway_sealer.hpp"
#include "kernel/launch/response_address.hpp"
#include "kernel/protocol/connection_file.hpp"
#include "kernel/protocol/port_range.hpp"

namespace belljar {

// As the command line gave them (nullopt: not given).
struct GatewayLaunchArgs {
  std::optional<std::string> kernel_id, port_range, response_address, public_key;
  std::string ip = "0.0.0.0";  // where the channels listen (--ip): every interface of the pod
};

struct GatewayLaunch {
  std::string kernel_id;
  PortRange ports;
  ResponseAddress response;
  std::shared_ptr<const PayloadSealer> sealer;  // for the gateway's public key
  std::string ip;
};

// Flags first, then the environment (`getenv`); throws UsageError naming what is missing or
// wrong, before anything is bound or started. The key is checked by the sealing module, loaded
// from `gateway_module` (gateway_sealer.hpp).
GatewayLaunch resolve_gateway_launch(const GatewayLaunchArgs& args,
                                     const std::function<const char*(const char*)>& getenv,
                                     const std::string& gateway_module);

// The connection info as the gateway reads it: the five ports, ip, key, transport, signature
// scheme, kernel_name, and pid, pgid, comm_port and kernel_id.
nlohmann::json gateway_connection_info(const ConnectionInfo& connection, uint16_t comm_port,
                                       const std::string& kernel_id);

}  // namespace belljar
