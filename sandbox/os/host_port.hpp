#pragma once
// A host and port as URLs, Host headers and logs write them. An IPv6 literal goes in brackets
// ([::1]:8888), or its last group would read as the port; a host that already has its
// brackets keeps them as they are. One helper for the supervisor (connection file endpoints,
// the audit log) and the sandbox (allowlist rules, the egress proxy), so they never disagree.
#include <cstdint>
#include <string>
#include <string_view>

namespace belljar {

// "example.com", "[::1]" (from "::1" or "[::1]").
std::string bracketed_host(std::string_view host);
// "example.com:443", "[::1]:8888".
std::string host_port(std::string_view host, uint16_t port);

}  // namespace belljar
