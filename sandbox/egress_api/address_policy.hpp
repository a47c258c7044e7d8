#pragma once
// Which addresses the egress proxy may connect to when a *name* resolved to them: public
// unicast only. Everything that points back inside — loopback, private networks (RFC 1918,
// IPv6 ULA), link-local (the cloud metadata service at 169.254.169.254), CGNAT, multicast,
// "this network" 0.0.0.0/8 (which Linux routes to the host itself), reserved and documentation
// ranges — is refused, so a DNS answer (or a rebinding attack) cannot reach the host's or the
// LAN's services. IPv4 embedded in IPv6 (mapped, NAT64, 6to4) is judged by the IPv4 inside.
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace belljar {

struct IpAddress {
  int family = AF_INET;             // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};  // network order; the first 4 for AF_INET

  // Strict numeric forms only ("127.0.0.1", "::1"; no "127.1", no zone ids); nullopt otherwise.
  static std::optional<IpAddress> parse(std::string_view text);
  std::string text() const;  // canonical: "127.0.0.1", "2001:db8::1"
  bool operator==(const IpAddress& other) const;
};

enum class AddressScope {
  public_unicast,
  unspecified,      // 0.0.0.0/8, ::
  loopback,         // 127.0.0.0/8, ::1
  private_network,  // 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10, 64:ff9b:1::/48
  shared,           // 100.64.0.0/10 (carrier-grade NAT)
  link_local,       // 169.254/16, fe80::/10
  multicast,        // 224/4, ff00::/8
  broadcast,        // 255.255.255.255
  reserved,         // documentation, benchmarking, 240/4, IETF assignments, non-global IPv6
};

AddressScope classify(const IpAddress& address);
// "a loopback address", "a private-network address", ... for refusals.
std::string describe_scope(AddressScope scope);

}  // namespace belljar
