#pragma once
// The allowlist's matching: which rule, if any, lets a request reach HOST:PORT.
//   example.com        that name exactly
//   *.example.com      any subdomain, at any depth (a.example.com, a.b.example.com), never
//                      example.com itself
//   10.0.0.5, ::1      that address, in any spelling of it (::1 == 0:0::1); never a name
// A rule without a port gives 80 and 443. Names compare in lower case, without a trailing dot.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/egress_api/address_policy.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

// A request's host, normalised: a DNS name (lower case, no trailing dot) or an IP literal (its
// canonical text; IPv6 without brackets).
struct RequestHost {
  std::string name;
  std::optional<IpAddress> literal;
};

// nullopt when the text is neither a plausible DNS name (letters, digits, '-', '.', labels of
// 1-63, at most 253 in all) nor an IP literal: such a host can match no rule.
std::optional<RequestHost> normalize_host(std::string_view text);

struct HostVerdict {
  enum class Kind { allowed, host_not_allowed, port_not_allowed };
  Kind kind = Kind::host_not_allowed;
  const HostRule* rule = nullptr;       // allowed: the rule that did it (a local one if any)
  std::vector<uint16_t> allowed_ports;  // port_not_allowed: what the host's rules allow
};

HostVerdict match_host(const std::vector<HostRule>& rules, const RequestHost& host, uint16_t port);

// How the rule reads on a command line: "--allow-net example.com", "--allow-local-net db:5432".
std::string rule_flag_text(const HostRule& rule);

}  // namespace belljar
