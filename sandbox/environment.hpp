#pragma once
// The sandbox's environment is built, never inherited: an allowlist of harmless names copied
// from the kernel's environment, then --pass-env, then --set-env. The kernel's own variables
// (tokens, JPY_*, the connection file's whereabouts) never cross.
#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/policy.hpp"

namespace belljar {

// The names copied when present: LANG, LC_*, TZ, TERM.
bool allowlisted_variable(const std::string& name);

// NAME=VALUE entries. PATH is the interpreter's bin directories then the system ones; HOME is
// the sandbox's private home.
std::vector<std::string> sandbox_environment(const Policy& policy,
                                             const std::vector<std::filesystem::path>& bin_dirs,
                                             const std::string& home, const char* const* host_env);

}  // namespace belljar
