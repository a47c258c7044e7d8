#include "kernel/protocol/connection_file.hpp"

#include <unistd.h>

#include "kernel/protocol/bounded_json.hpp"
#include "sandbox/os/host_port.hpp"
#include "sandbox/os/small_file.hpp"
#include "sandbox/os/usage_error.hpp"

namespace belljar {

std::string ConnectionInfo::endpoint(int port) const {
  if (transport == "ipc") return "ipc://" + ip + "-" + std::to_string(port);
  return "tcp://" + host_port(ip, static_cast<uint16_t>(port));
}

ConnectionInfo read_connection_file(const std::string& path) {
  if (::access(path.c_str(), R_OK) != 0)
    throw UsageError("connection file " + path + ": cannot be read");
  std::string text = read_small_file(path, (1 << 20) + 1);
  if (text.size() > (1 << 20)) throw UsageError("connection file " + path + ": too large");
  return parse_connection_info(text, path);
}

ConnectionInfo parse_connection_info(const std::string& text, const std::string& path) {
  const std::string where = "connection file " + path + ": ";
  std::string why;
  auto doc = parse_bounded_json(text, &why);
  if (!doc || !doc->is_object()) throw UsageError(where + "not a JSON object");
  auto get_string = [&](const char* key, const char* fallback) -> std::string {
    auto it = doc->find(key);
    if (it == doc->end()) {
      if (fallback) return fallback;
      throw UsageError(where + "missing \"" + key + "\"");
    }
    if (!it->is_string()) throw UsageError(where + "\"" + key + "\" must be a string");
    return it->get<std::string>();
  };
  ConnectionInfo info;
  info.transport = get_string("transport", "tcp");
  if (info.transport != "tcp" && info.transport != "ipc")
    throw UsageError(where + "transport \"" + info.transport + "\" is not tcp or ipc");
  info.ip = get_string("ip", "127.0.0.1");
  if (info.ip.empty()) throw UsageError(where + "empty \"ip\"");
  info.key = get_string("key", nullptr);
  if (info.key.empty())
    throw UsageError(where + "empty \"key\": belljar refuses unsigned messaging");
  info.signature_scheme = get_string("signature_scheme", "hmac-sha256");
  if (info.signature_scheme != "hmac-sha256")
    throw UsageError(where + "signature_scheme \"" + info.signature_scheme +
                     "\" is not supported (only hmac-sha256)");
  struct Port {
    const char* name;
    int* slot;
  };
  Port ports[] = {{"shell_port", &info.shell_port},
                  {"iopub_port", &info.iopub_port},
                  {"stdin_port", &info.stdin_port},
                  {"control_port", &info.control_port},
                  {"hb_port", &info.hb_port}};
  for (auto& port : ports) {
    auto it = doc->find(port.name);
    if (it == doc->end()) throw UsageError(where + "missing \"" + port.name + "\"");
    if (!it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > 65535)
      throw UsageError(where + "\"" + port.name + "\" must be a port number from 1 to 65535");
    *port.slot = it->get<int>();
  }
  return info;
}

}  // namespace belljar
