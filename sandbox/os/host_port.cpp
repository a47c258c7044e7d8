// host:port with IPv6 literals bracketed (host_port.hpp).
#include "sandbox/os/host_port.hpp"

namespace belljar {

std::string bracketed_host(std::string_view host) {
  bool bare_v6 = host.find(':') != std::string_view::npos && !host.starts_with('[');
  return bare_v6 ? "[" + std::string(host) + "]" : std::string(host);
}

std::string host_port(std::string_view host, uint16_t port) {
  return bracketed_host(host) + ":" + std::to_string(port);
}

}  // namespace belljar
