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

// The environment allowlist, the one list of it: the names copied from the kernel's
// environment when present (an entry ending in '*' is a prefix: LC_*). Their values are
// harmless by definition (locale, time zone, terminal type), so the output redactor never masks
// them either, even when --pass-env or --set-env names them.
const std::vector<std::string>& environment_allowlist();
bool allowlisted_variable(const std::string& name);  // matches an entry of the allowlist

// The names the sandbox sets itself whatever the kernel's environment says: PATH, HOME, USER,
// LOGNAME. Not secrets either (see harmless_variable).
const std::vector<std::string>& sandbox_built_variables();

// True when a variable's value is not a secret by the sandbox's rules: allowlisted, or one the
// sandbox builds itself. The redactor asks this for every --pass-env and --set-env name.
//
// PATH is deliberately harmless even when --pass-env PATH or --set-env PATH=... replaces the
// sandbox's own: its value is everywhere (os.environ, `which`, shutil.which, tracebacks of
// subprocess, sys.path-like listings), one directory at a time as often as whole. Masking the
// whole string would mangle ordinary output and still leave each part readable, so it cannot be
// kept secret by redaction; a secret does not belong in PATH.
bool harmless_variable(const std::string& name);

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

// SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and NODE_EXTRA_CA_CERTS = PATH: what
// OpenSSL (Python's ssl, urllib, httpx), requests, curl and Node read for the CAs to trust.
// Set when a secret is bound, to the bundle holding the system CAs and the session's CA.
std::vector<std::pair<std::string, std::string>> ca_bundle_variables(const std::string& path);

}  // namespace belljar
