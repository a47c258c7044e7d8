#pragma once
// The sandbox's environment is built, never inherited: an allowlist of harmless names copied
// from the kernel's environment, then --pass-env, then --set-env. The kernel's own variables
// (tokens, JPY_*, the connection file's whereabouts) never cross.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/policy/policy.hpp"

namespace belljar {

// The names copied when present: LANG, LC_*, TZ, TERM.
bool allowlisted_variable(const std::string& name);

// NAME=VALUE entries. PATH is the interpreter's bin directories then the system ones; HOME is
// the sandbox's private home. With an egress port, the proxy variables point at it.
std::vector<std::string> sandbox_environment(const Policy& policy,
                                             const std::vector<std::filesystem::path>& bin_dirs,
                                             const std::string& home, const char* const* host_env,
                                             uint16_t egress_port = 0);

// HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and their lower-case forms (what pip, requests, httpx,
// urllib, curl, wget and git read) = http://127.0.0.1:PORT. NO_PROXY is left unset: even
// 127.0.0.1 goes to the proxy, which is how an allowlisted host-loopback service is reached.
std::vector<std::pair<std::string, std::string>> proxy_variables(uint16_t egress_port);

}  // namespace belljar
