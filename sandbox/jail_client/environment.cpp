#include "sandbox/jail_client/environment.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <string_view>
#include <vector>

#include "sandbox/os/search_path.hpp"

namespace belljar {

const std::vector<std::string>& environment_allowlist() {
  static const std::vector<std::string> names = {"LANG", "LC_*", "TZ", "TERM"};
  return names;
}

bool allowlisted_variable(const std::string& name) {
  for (const auto& entry : environment_allowlist()) {
    bool prefix = entry.ends_with('*');
    if (prefix ? name.starts_with(std::string_view(entry).substr(0, entry.size() - 1))
               : name == entry)
      return true;
  }
  return false;
}

const std::vector<std::string>& sandbox_built_variables() {
  static const std::vector<std::string> names = {"PATH", "HOME", "USER", "LOGNAME"};
  return names;
}

bool harmless_variable(const std::string& name) {
  const auto& built = sandbox_built_variables();
  return allowlisted_variable(name) || std::find(built.begin(), built.end(), name) != built.end();
}

std::vector<std::pair<std::string, std::string>> proxy_variables(uint16_t egress_port) {
  const std::string url = "http://127.0.0.1:" + std::to_string(egress_port);
  std::vector<std::pair<std::string, std::string>> vars;
  for (const char* name : {"http_proxy", "https_proxy", "all_proxy"}) {
    std::string upper(name);
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    vars.emplace_back(name, url);
    vars.emplace_back(upper, url);
  }
  return vars;
}

std::vector<std::string> sandbox_environment(const Policy& policy,
                                             const std::vector<std::filesystem::path>& bin_dirs,
                                             const std::string& home, const char* const* host_env,
                                             uint16_t egress_port) {
  std::map<std::string, std::string> host;
  for (const char* const* entry = host_env; entry && *entry; ++entry) {
    std::string text(*entry);
    auto eq = text.find('=');
    if (eq != std::string::npos) host.emplace(text.substr(0, eq), text.substr(eq + 1));
  }

  std::vector<std::string> path;
  auto add_dir = [&](const std::string& dir) {
    if (std::find(path.begin(), path.end(), dir) == path.end()) path.push_back(dir);
  };
  for (const auto& dir : bin_dirs) add_dir(dir.string());
  for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin"}) add_dir(dir);

  std::map<std::string, std::string> env = {{"PATH", join_search_path(path)},
                                            {"HOME", home},
                                            {"USER", "sandbox"},
                                            {"LOGNAME", "sandbox"}};
  for (const auto& [name, value] : host)
    if (allowlisted_variable(name)) env[name] = value;
  // Before --pass-env and --set-env: a policy may still say NO_PROXY=... on purpose.
  if (egress_port != 0)
    for (const auto& [name, value] : proxy_variables(egress_port)) env[name] = value;
  for (const auto& name : policy.pass_env)
    if (auto it = host.find(name); it != host.end()) env[name] = it->second;
  for (const auto& [name, value] : policy.set_env) env[name] = value;

  std::vector<std::string> entries;
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  return entries;
}

std::vector<std::pair<std::string, std::string>> ca_bundle_variables(const std::string& path) {
  return {{"SSL_CERT_FILE", path},
          {"REQUESTS_CA_BUNDLE", path},
          {"CURL_CA_BUNDLE", path},
          {"NODE_EXTRA_CA_CERTS", path}};
}

}  // namespace belljar
