#include "kernel/launch/gateway_launch.hpp"

#include <unistd.h>

#include "sandbox/policy/policy.hpp"

namespace belljar {

namespace {
// The flag's value, else the first of the variables that is set and not empty.
std::optional<std::string> flag_or_env(const std::optional<std::string>& flag,
                                       std::initializer_list<const char*> names,
                                       const std::function<const char*(const char*)>& getenv) {
  if (flag) return flag;
  for (const char* name : names)
    if (const char* value = getenv(name); value && *value) return std::string(value);
  return std::nullopt;
}
}  // namespace

GatewayLaunch resolve_gateway_launch(const GatewayLaunchArgs& args,
                                     const std::function<const char*(const char*)>& getenv,
                                     const std::string& gateway_module) {
  GatewayLaunch launch;
  auto kernel_id = flag_or_env(args.kernel_id, {"KERNEL_ID"}, getenv);
  if (!kernel_id || kernel_id->empty())
    throw UsageError("belljar launch needs --kernel-id ID (or KERNEL_ID)");
  if (kernel_id->size() > 128 ||
      kernel_id->find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789-_.") != std::string::npos)
    throw UsageError("--kernel-id " + *kernel_id +
                     ": use letters, digits, '-', '_' and '.' (the gateway's ids are UUIDs)");
  launch.kernel_id = *kernel_id;

  auto ports = flag_or_env(args.port_range, {"PORT_RANGE", "EG_PORT_RANGE"}, getenv);
  launch.ports = parse_port_range(ports.value_or("0..0"), "--port-range");

  auto response =
      flag_or_env(args.response_address, {"RESPONSE_ADDRESS", "EG_RESPONSE_ADDRESS"}, getenv);
  if (!response)
    throw UsageError(
        "belljar launch needs --response-address IP:PORT (or RESPONSE_ADDRESS): where the "
        "gateway waits for the connection info");
  launch.response = parse_response_address(*response);

  auto key = flag_or_env(args.public_key, {"PUBLIC_KEY", "EG_PUBLIC_KEY"}, getenv);
  if (!key)
    throw UsageError(
        "belljar launch needs --public-key KEY (or PUBLIC_KEY): the gateway's RSA public key");
  launch.sealer = load_gateway_sealer(gateway_module, *key);
  launch.ip = args.ip;
  return launch;
}

nlohmann::json gateway_connection_info(const ConnectionInfo& connection, uint16_t comm_port,
                                       const std::string& kernel_id) {
  return {{"shell_port", connection.shell_port},
          {"iopub_port", connection.iopub_port},
          {"stdin_port", connection.stdin_port},
          {"control_port", connection.control_port},
          {"hb_port", connection.hb_port},
          {"ip", connection.ip},
          {"key", connection.key},
          {"transport", connection.transport},
          {"signature_scheme", connection.signature_scheme},
          {"kernel_name", ""},
          {"pid", ::getpid()},
          {"pgid", ::getpgid(0)},
          {"comm_port", comm_port},
          {"kernel_id", kernel_id}};
}

}  // namespace belljar
