#include "sandbox/egress_api/address_policy.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>

namespace belljar {

namespace {

uint32_t v4_value(const uint8_t* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

bool in_v4(uint32_t address, uint32_t network, int prefix) {
  uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  return (address & mask) == (network & mask);
}

constexpr uint32_t ip4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return (uint32_t{a} << 24) | (uint32_t{b} << 16) | (uint32_t{c} << 8) | uint32_t{d};
}

AddressScope classify_v4(uint32_t a) {
  if (in_v4(a, ip4(0, 0, 0, 0), 8)) return AddressScope::unspecified;
  if (in_v4(a, ip4(127, 0, 0, 0), 8)) return AddressScope::loopback;
  if (in_v4(a, ip4(10, 0, 0, 0), 8) || in_v4(a, ip4(172, 16, 0, 0), 12) ||
      in_v4(a, ip4(192, 168, 0, 0), 16))
    return AddressScope::private_network;
  if (in_v4(a, ip4(100, 64, 0, 0), 10)) return AddressScope::shared;
  if (in_v4(a, ip4(169, 254, 0, 0), 16)) return AddressScope::link_local;
  if (a == ip4(255, 255, 255, 255)) return AddressScope::broadcast;
  if (in_v4(a, ip4(224, 0, 0, 0), 4)) return AddressScope::multicast;
  if (in_v4(a, ip4(240, 0, 0, 0), 4) ||      // future use
      in_v4(a, ip4(192, 0, 0, 0), 24) ||     // IETF protocol assignments
      in_v4(a, ip4(192, 0, 2, 0), 24) ||     // documentation
      in_v4(a, ip4(198, 51, 100, 0), 24) ||  // documentation
      in_v4(a, ip4(203, 0, 113, 0), 24) ||   // documentation
      in_v4(a, ip4(192, 88, 99, 0), 24) ||   // 6to4 relay anycast
      in_v4(a, ip4(198, 18, 0, 0), 15))      // benchmarking (and many fake-IP resolvers)
    return AddressScope::reserved;
  return AddressScope::public_unicast;
}

bool has_prefix(const std::array<uint8_t, 16>& b, std::initializer_list<uint8_t> prefix_bytes,
                int bits) {
  int i = 0;
  for (uint8_t byte : prefix_bytes) {
    int take = std::min(8, bits - i * 8);
    if (take <= 0) break;
    uint8_t mask = static_cast<uint8_t>(0xff << (8 - take));
    if ((b[i] & mask) != (byte & mask)) return false;
    ++i;
  }
  return true;
}

AddressScope classify_v6(const std::array<uint8_t, 16>& b) {
  static const uint8_t zero[16] = {};
  if (std::memcmp(b.data(), zero, 16) == 0) return AddressScope::unspecified;
  if (std::memcmp(b.data(), zero, 15) == 0 && b[15] == 1) return AddressScope::loopback;
  // ::ffff:a.b.c.d (mapped) and 64:ff9b::a.b.c.d (NAT64): the IPv4 inside decides.
  if (std::memcmp(b.data(), zero, 10) == 0 && b[10] == 0xff && b[11] == 0xff)
    return classify_v4(v4_value(&b[12]));
  if (has_prefix(b, {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}, 96))
    return classify_v4(v4_value(&b[12]));
  if (has_prefix(b, {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48)) return AddressScope::private_network;
  if (std::memcmp(b.data(), zero, 12) == 0)
    return AddressScope::reserved;  // IPv4-compatible (deprecated)
  if (has_prefix(b, {0x20, 0x02}, 16))
    return classify_v4(v4_value(&b[2]));                               // 6to4: 2002:a.b.c.d::/48
  if (has_prefix(b, {0xfc}, 7)) return AddressScope::private_network;  // ULA
  if (has_prefix(b, {0xfe, 0x80}, 10)) return AddressScope::link_local;
  if (has_prefix(b, {0xfe, 0xc0}, 10)) return AddressScope::private_network;  // site-local
  if (has_prefix(b, {0xff}, 8)) return AddressScope::multicast;
  if (has_prefix(b, {0x20, 0x01, 0x0d, 0xb8}, 32)) return AddressScope::reserved;  // documentation
  if (has_prefix(b, {0x20, 0x01, 0x00}, 23)) return AddressScope::reserved;  // IETF, Teredo, ORCHID
  if (has_prefix(b, {0x01, 0x00, 0, 0, 0, 0, 0, 0}, 64))
    return AddressScope::reserved;                               // discard-only
  if (!has_prefix(b, {0x20}, 3)) return AddressScope::reserved;  // outside global unicast 2000::/3
  return AddressScope::public_unicast;
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.empty() || text.size() > 45) return std::nullopt;
  std::string s(text);
  IpAddress address;
  if (::inet_pton(AF_INET, s.c_str(), address.bytes.data()) == 1) {
    address.family = AF_INET;
    return address;
  }
  if (::inet_pton(AF_INET6, s.c_str(), address.bytes.data()) == 1) {
    address.family = AF_INET6;
    return address;
  }
  return std::nullopt;
}

std::string IpAddress::text() const {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(family, bytes.data(), buf, sizeof buf);
  return buf;
}

bool IpAddress::operator==(const IpAddress& other) const {
  if (family != other.family) return false;
  return std::memcmp(bytes.data(), other.bytes.data(), family == AF_INET ? 4 : 16) == 0;
}

AddressScope classify(const IpAddress& address) {
  if (address.family == AF_INET) return classify_v4(v4_value(address.bytes.data()));
  return classify_v6(address.bytes);
}

std::string describe_scope(AddressScope scope) {
  switch (scope) {
    case AddressScope::public_unicast:
      return "a public address";
    case AddressScope::unspecified:
      return "an unspecified (this-host) address";
    case AddressScope::loopback:
      return "a loopback address";
    case AddressScope::private_network:
      return "a private-network address";
    case AddressScope::shared:
      return "a carrier-grade NAT address";
    case AddressScope::link_local:
      return "a link-local address";
    case AddressScope::multicast:
      return "a multicast address";
    case AddressScope::broadcast:
      return "the broadcast address";
    case AddressScope::reserved:
      return "a reserved address";
  }
  return "a non-public address";
}

}  // namespace belljar
