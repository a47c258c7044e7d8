#include "sandbox/policy/policy.hpp"

#include <arpa/inet.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include "sandbox/os/host_port.hpp"
#include "sandbox/os/search_path.hpp"

namespace belljar {
namespace fs = std::filesystem;

namespace {


bool is_flag_with_value(const std::string& flag) {
  static const char* kValued[] = {"--workspace", "--ro",       "--hide",        "--allow-net",
                                  "--pass-env",  "--set-env",  "--timeout",     "--cpu",
                                  "--memory",    "--pids",     "--file-size",   "--tmp-size",
                                  "--output-limit", "--python", "--sandbox-user", "--audit-log",
                                  "--isolation", "--policy", "--metrics", "--allow-local-net",
                                  "--protect", "--writable", "--workspace-quota",
                                  "--active-output"};
  for (const char* name : kValued)
    if (flag == name) return true;
  return false;
}

bool valid_env_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

fs::path absolute_dir(const std::string& flag, const std::string& text, bool must_be_dir) {
  if (text.empty()) throw UsageError(flag + ": empty path");
  std::error_code ec;
  fs::path path = fs::weakly_canonical(fs::absolute(text), ec);
  if (ec) throw UsageError(flag + " " + text + ": " + ec.message());
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw UsageError(flag + " " + text + ": no such file or directory");
  if (must_be_dir && !S_ISDIR(st.st_mode)) throw UsageError(flag + " " + text + ": not a directory");
  return path;
}

bool is_script(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[2] = {0, 0};
  in.read(magic, 2);
  return magic[0] == '#' && magic[1] == '!';
}

// A launcher script (a pyenv shim, a wrapper) can't run inside the sandbox without its own
// tools, and asking it for the real interpreter would run whatever it says on the host, as the
// kernel's user: it is refused, never run, with the command that prints the interpreter. A
// venv's bin/python is a binary (or a link to one) and is kept.
void refuse_script(const std::string& flag, const std::string& path) {
  if (is_script(path))
    throw UsageError(flag + " " + path +
                     " is a script (a pyenv shim?), not an interpreter, and is never run on the "
                     "host: pass the interpreter itself, as printed by " +
                     path + " -c 'import sys; print(sys.executable)'");
}

// The interpreter the worker runs: an absolute path to an executable file. A bare name is
// looked up on PATH (install resolves it once, so kernel.json names a real file), passing over
// launcher scripts (pyenv's shims come first on PATH) to the first interpreter itself.
std::string resolve_python(const std::string& flag, const std::string& text) {
  if (text.empty()) throw UsageError(flag + ": empty path");
  if (text.find('/') == std::string::npos) {
    const char* path_env = std::getenv("PATH");
    std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
    std::string script;
    for (const auto& dir : split_search_path(path)) {
      fs::path candidate = fs::path(dir) / text;
      if (dir.empty() || ::access(candidate.c_str(), X_OK) != 0) continue;
      std::string found = fs::absolute(candidate).string();
      if (!is_script(found)) return found;
      if (script.empty()) script = found;
    }
    if (!script.empty()) refuse_script(flag, script);  // only scripts: refused, naming one
    throw UsageError(flag + " " + text + ": not found on PATH");
  }
  fs::path path = fs::absolute(text);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0)
    throw UsageError(flag + " " + text + ": not an executable file");
  // Keep the name the user gave (a venv's bin/python must stay a venv python), only absolute.
  std::string given = path.lexically_normal().string();
  refuse_script(flag, given);
  return given;
}

void apply(Policy& policy, const std::string& flag, const std::string& value) {
  if (flag == "--workspace") {
    policy.workspace = absolute_dir(flag, value, true);
  } else if (flag == "--ro") {
    policy.read_only.push_back(absolute_dir(flag, value, false));
  } else if (flag == "--hide") {
    if (value.empty() || value.find('\0') != std::string::npos) throw UsageError(flag + ": empty pattern");
    policy.hide.push_back(value);
  } else if (flag == "--protect") {
    if (value.empty() || value.find('\0') != std::string::npos) throw UsageError(flag + ": empty pattern");
    policy.protect.push_back(value);
  } else if (flag == "--writable") {
    const auto& defaults = default_protected_patterns();
    if (std::find(defaults.begin(), defaults.end(), value) == defaults.end())
      throw UsageError(flag + " " + value + ": not one of the default read-only patterns (" +
                       [&] {
                         std::string all;
                         for (const auto& p : defaults) all += (all.empty() ? "" : " ") + p;
                         return all;
                       }() + ")");
    policy.writable.push_back(value);
  } else if (flag == "--workspace-quota") {
    policy.workspace_quota_bytes = parse_size(flag, value);
  } else if (flag == "--allow-net") {
    policy.allow_net.push_back(parse_host_rule(flag, value));
  } else if (flag == "--allow-local-net") {
    // Allowed, and allowed to resolve to loopback and private addresses (a LAN service).
    HostRule rule = parse_host_rule(flag, value);
    rule.local = true;
    policy.allow_net.push_back(rule);
  } else if (flag == "--pass-env") {
    if (!valid_env_name(value)) throw UsageError(flag + " " + value + ": not a variable name");
    policy.pass_env.push_back(value);
  } else if (flag == "--set-env") {
    auto eq = value.find('=');
    if (eq == std::string::npos || !valid_env_name(value.substr(0, eq)))
      throw UsageError(flag + " " + value.substr(0, value.find('=')) + ": expected NAME=VALUE");
    policy.set_env.emplace_back(value.substr(0, eq), value.substr(eq + 1));
  } else if (flag == "--timeout") {
    policy.timeout_seconds = parse_duration(flag, value);
  } else if (flag == "--cpu") {
    policy.cpu_seconds = parse_duration(flag, value);
  } else if (flag == "--memory") {
    policy.memory_bytes = parse_size(flag, value);
    if (policy.memory_bytes < (32ull << 20)) throw UsageError(flag + " " + value + ": below the 32M a Python session needs");
  } else if (flag == "--pids") {
    char* end = nullptr;
    errno = 0;
    unsigned long long n = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno || n < 8 || n > 1000000 || value[0] == '-')
      throw UsageError(flag + " " + value + ": expected a number of processes from 8 to 1000000");
    policy.pids = n;
  } else if (flag == "--file-size") {
    policy.file_size_bytes = parse_size(flag, value);
  } else if (flag == "--tmp-size") {
    policy.tmp_size_bytes = parse_size(flag, value);
  } else if (flag == "--output-limit") {
    policy.output_limit_bytes = parse_size(flag, value);
  } else if (flag == "--python") {
    policy.python = resolve_python(flag, value);
  } else if (flag == "--sandbox-user") {
    if (value.empty()) throw UsageError(flag + ": empty user");
    if (value == "root" || value == "0") throw UsageError(flag + " " + value + ": code never runs as root");
    if (!::getpwnam(value.c_str())) {
      // A numeric uid: digits only, a real uid (not 0, not the (uid_t)-1 "no change" value).
      bool digits = value.size() <= 10 &&
                    std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); });
      unsigned long long uid = digits ? std::strtoull(value.c_str(), nullptr, 10) : 0;
      if (!digits || uid == 0 || uid >= 4294967295ull) throw UsageError(flag + " " + value + ": no such user");
    }
    policy.sandbox_user = value;
  } else if (flag == "--audit-log") {
    if (value.empty()) throw UsageError(flag + ": empty path");
    policy.audit_log = fs::absolute(value).string();
  } else if (flag == "--metrics") {
    if (value.empty()) throw UsageError(flag + ": empty path");
    policy.metrics_file = fs::absolute(value).string();
  } else if (flag == "--audit-code") {
    if (value != "true" && value != "false") throw UsageError(flag + ": expected true or false");
    policy.audit_code = value == "true";
  } else if (flag == "--isolation") {
    policy.isolation = parse_isolation(value);
  } else if (flag == "--active-output") {
    policy.active_output = parse_active_output(value);
  } else {
    throw UsageError("unknown policy flag " + flag);
  }
}

// A --policy file holds the same names as the flags, without the dashes.
std::vector<std::pair<std::string, std::string>> read_policy_file(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw UsageError("--policy " + file + ": cannot read the file");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("--policy " + file + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!doc.is_object()) throw UsageError("--policy " + file + ": expected a JSON object");
  std::vector<std::pair<std::string, std::string>> settings;
  for (auto& [raw_key, value] : doc.items()) {
    // "allow-net" as on the command line, or "allow_net" as in the audit log's policy summary.
    std::string key = raw_key;
    std::replace(key.begin(), key.end(), '_', '-');
    std::string flag = "--" + key;
    if ((!is_flag_with_value(flag) && key != "audit-code") || key == "policy")
      throw UsageError("--policy " + file + ": unknown setting \"" + key + "\"");
    auto scalar = [&](const nlohmann::json& v) {
      if (v.is_string()) return v.get<std::string>();
      if (v.is_number() || v.is_boolean()) return v.dump();
      throw UsageError("--policy " + file + ": \"" + key + "\" must be a string or number");
    };
    if (value.is_array()) {
      for (auto& item : value) settings.emplace_back(flag, scalar(item));
    } else if (value.is_object() && key == "set-env") {
      for (auto& [name, v] : value.items()) settings.emplace_back(flag, name + "=" + scalar(v));
    } else {
      settings.emplace_back(flag, scalar(value));
    }
  }
  return settings;
}

}  // namespace

std::string HostRule::text() const {
  if (ports.size() == 2 && ports[0] == 80 && ports[1] == 443) return bracketed_host(host);
  return host_port(host, ports.front());
}

const std::vector<std::string>& default_hidden_patterns() {
  static const std::vector<std::string> patterns = {
      ".env", ".env.*", ".ssh", ".aws", ".netrc", ".git-credentials", ".pypirc", ".npmrc",
      ".docker/config.json", ".kube", "*.pem", "*.key", "id_rsa*", "id_ed25519*"};
  return patterns;
}

const std::vector<std::string>& default_protected_patterns() {
  static const std::vector<std::string> patterns = {
      // git runs hooks, fsmonitor, pagers and filters named in .git (config, hooks, commondir,
      // a worktree's gitdir file) and fetches what .gitmodules names
      ".git", ".gitmodules",
      // direnv and mise run these on cd; editors run tasks and interpreters named in theirs
      ".envrc", ".mise.toml", ".vscode", ".idea", ".pre-commit-config.yaml",
      // shells' start-up files, for a workspace that is (or holds) a home directory
      ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
      ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".config/fish",
      "/.config/autostart", "/.config/systemd", "/.local/bin"};
  return patterns;
}

std::vector<std::string> protected_patterns(const Policy& policy) {
  std::vector<std::string> patterns;
  for (const auto& pattern : default_protected_patterns())
    if (std::find(policy.writable.begin(), policy.writable.end(), pattern) == policy.writable.end())
      patterns.push_back(pattern);
  patterns.insert(patterns.end(), policy.protect.begin(), policy.protect.end());
  return patterns;
}

// "1.5G" -> {1.5, "G"}: a plain decimal (no sign, padding or hex) and what follows it.
static std::pair<double, std::string> split_number(const std::string& text, const std::string& bad) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.') ||
      text.find_first_of("xX") != std::string::npos)
    throw UsageError(bad);
  char* end = nullptr;
  errno = 0;
  double number = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno || !std::isfinite(number) || number < 0) throw UsageError(bad);
  return {number, std::string(end)};
}

uint64_t parse_size(const std::string& flag, const std::string& text) {
  const std::string bad = flag + " " + text + ": expected a size like 512M or 1G";
  auto [number, unit] = split_number(text, bad);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b') && unit.size() <= 3) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  double scale = 1;
  if (unit.empty()) scale = 1;
  else if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M" || unit == "m") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  else throw UsageError(bad);
  double bytes = number * scale;
  if (bytes < 1 || bytes > 1.0e18) throw UsageError(flag + " " + text + ": out of range");
  return static_cast<uint64_t>(bytes);
}

double parse_duration(const std::string& flag, const std::string& text) {
  const std::string bad = flag + " " + text + ": expected seconds like 30, 1.5s, 2m or 1h";
  auto [number, unit] = split_number(text, bad);
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "ms") scale = 0.001;
  else if (unit == "m") scale = 60;
  else if (unit == "h") scale = 3600;
  else throw UsageError(bad);
  double seconds = number * scale;
  if (seconds < 0.01 || seconds > 7 * 24 * 3600.0) throw UsageError(flag + " " + text + ": out of range (10ms to 7 days)");
  return seconds;
}

HostRule parse_host_rule(const std::string& flag, const std::string& text) {
  const std::string bad = flag + " " + text + ": expected HOST[:PORT], *.DOMAIN[:PORT] or [IPv6][:PORT]";
  HostRule rule;
  std::string host = text, port;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) throw UsageError(bad);
    host = text.substr(1, close - 1);
    std::string rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') throw UsageError(bad);
      port = rest.substr(1);
      if (port.empty()) throw UsageError(bad);
    }
    if (host.empty() || host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos)
      throw UsageError(bad);
  } else if (std::count(text.begin(), text.end(), ':') > 1) {
    // A bare IPv6 literal: no port.
    if (text.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) throw UsageError(bad);
  } else if (auto colon = text.find(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) throw UsageError(bad);
  }
  if (host.empty() || host.size() > 253) throw UsageError(bad);
  if (host.find(':') == std::string::npos) {
    std::string name = host;
    if (name.rfind("*.", 0) == 0) name = name.substr(2);
    if (name.empty() || name.front() == '.' || name.back() == '.' || name.find("..") != std::string::npos)
      throw UsageError(bad);
    for (char c : name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.')) throw UsageError(bad);
    for (auto& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  // Literal addresses in canonical form, so the proxy compares like with like.
  unsigned char address[16];
  char canonical[64];
  if (host.find(':') != std::string::npos) {
    if (::inet_pton(AF_INET6, host.c_str(), address) != 1) throw UsageError(bad);
    host = ::inet_ntop(AF_INET6, address, canonical, sizeof canonical);
  }
  rule.host = host;
  if (port.empty()) {
    rule.ports = {80, 443};
  } else {
    char* end = nullptr;
    long n = std::strtol(port.c_str(), &end, 10);
    if (*end != '\0' || n < 1 || n > 65535 || !std::isdigit(static_cast<unsigned char>(port[0])))
      throw UsageError(flag + " " + text + ": port must be 1 to 65535");
    rule.ports = {static_cast<uint16_t>(n)};
  }
  return rule;
}

Isolation parse_isolation(const std::string& text) {
  if (text == "strict") return Isolation::strict;
  if (text == "degraded") return Isolation::degraded;
  if (text == "none") return Isolation::none;
  throw UsageError("--isolation " + text + ": expected strict, degraded or none");
}

std::string isolation_name(Isolation isolation) {
  switch (isolation) {
    case Isolation::strict: return "strict";
    case Isolation::degraded: return "degraded";
    case Isolation::none: return "none";
  }
  return "strict";
}

ActiveOutput parse_active_output(const std::string& text) {
  if (text == "isolate") return ActiveOutput::isolate;
  if (text == "strip") return ActiveOutput::strip;
  if (text == "allow") return ActiveOutput::allow;
  throw UsageError("--active-output " + text + ": expected isolate, strip or allow");
}

std::string active_output_name(ActiveOutput mode) {
  switch (mode) {
    case ActiveOutput::isolate: return "isolate";
    case ActiveOutput::strip: return "strip";
    case ActiveOutput::allow: return "allow";
  }
  return "isolate";
}

nlohmann::json Policy::summary() const {
  nlohmann::json hosts = nlohmann::json::array();
  for (auto& rule : allow_net) hosts.push_back(rule.text() + (rule.local ? " (local)" : ""));
  nlohmann::json ro = nlohmann::json::array();
  for (auto& path : read_only) ro.push_back(path.string());
  nlohmann::json set_names = nlohmann::json::array();
  for (auto& [name, value] : set_env) set_names.push_back(name);  // never the values
  return {{"isolation", isolation_name(isolation)},
          {"active_output", active_output_name(active_output)},
          {"workspace", workspace.string()},
          {"read_only", ro},
          {"hide", hide},
          {"protect", protected_patterns(*this)},
          {"allow_net", hosts},
          {"pass_env", pass_env},
          {"set_env", set_names},
          {"timeout_seconds", timeout_seconds},
          {"cpu_seconds", cpu_limit()},
          {"memory_bytes", memory_bytes},
          {"pids", pids},
          {"file_size_bytes", file_size_bytes},
          {"tmp_size_bytes", tmp_size_bytes},
          {"output_limit_bytes", output_limit_bytes},
          {"workspace_quota_bytes", workspace_quota_bytes},
          {"python", python}};
}

PolicyBuilder::PolicyBuilder() = default;

int PolicyBuilder::take(const std::vector<std::string>& args, size_t i) {
  std::string arg = args[i];
  std::string value;
  bool inline_value = false;
  if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
    value = arg.substr(eq + 1);
    arg = arg.substr(0, eq);
    inline_value = true;
  }
  if (arg == "--audit-code" && !inline_value) {
    given_.push_back(arg);
    given_.push_back("true");
    return 1;
  }
  if (!is_flag_with_value(arg) && arg != "--audit-code") return 0;
  if (!inline_value) {
    if (i + 1 >= args.size()) throw UsageError(arg + ": missing value");
    value = args[i + 1];
  }
  if (arg == "--policy") {
    policy_file_ = fs::absolute(value).string();
  } else {
    // Validate now so a bad value is reported where it was typed.
    Policy scratch;
    apply(scratch, arg, value);
  }
  given_.push_back(arg);
  given_.push_back(arg == "--policy" ? *policy_file_ : value);
  return inline_value ? 1 : 2;
}

Policy PolicyBuilder::build() const {
  Policy policy;
  std::error_code ec;
  policy.workspace = fs::current_path(ec);
  if (ec) throw UsageError("cannot read the working directory: " + ec.message());
  if (policy_file_)
    for (auto& [flag, value] : read_policy_file(*policy_file_)) apply(policy, flag, value);
  for (size_t i = 0; i + 1 < given_.size(); i += 2)
    if (given_[i] != "--policy") apply(policy, given_[i], given_[i + 1]);
  if (policy.python.empty()) policy.python = resolve_python("--python", "python3");
  return policy;
}

const std::vector<std::pair<std::string, std::string>>& policy_flag_help() {
  static const std::vector<std::pair<std::string, std::string>> help = {
      {"--policy FILE", "JSON file with the same settings (flags override it)"},
      {"--workspace DIR", "the one writable directory [the working directory]"},
      {"--ro PATH", "extra read-only path (repeatable)"},
      {"--hide GLOB", "extra pattern masked inside the workspace (repeatable)"},
      {"--protect GLOB", "extra pattern kept read-only inside the workspace (repeatable)"},
      {"--writable GLOB", "lift one default read-only pattern, e.g. .git (repeatable)"},
      {"--allow-net HOST[:PORT]", "egress allowed to HOST (repeatable; *.example.com) [none]"},
      {"--allow-local-net HOST",
       "like --allow-net, and HOST may resolve to private addresses [none]"},
      {"--pass-env NAME", "pass this environment variable into the sandbox (repeatable)"},
      {"--set-env NAME=VALUE", "set this variable inside the sandbox (repeatable)"},
      {"--timeout SECONDS", "wall-clock limit per cell [60]"},
      {"--cpu SECONDS", "CPU-time limit per cell [the timeout]"},
      {"--memory SIZE", "memory for the session [1G]"},
      {"--pids N", "processes and threads [256]"},
      {"--file-size SIZE", "largest file written [1G]"},
      {"--tmp-size SIZE", "private /tmp and /dev/shm [256M]"},
      {"--output-limit SIZE", "output kept per cell [10M]"},
      {"--workspace-quota SIZE", "what the session may add to the workspace; 0: no limit [1G]"},
      {"--python PATH", "interpreter inside the sandbox [python3 on PATH]"},
      {"--sandbox-user USER", "host user the code runs as when the kernel is root [nobody]"},
      {"--audit-log FILE", "JSON-lines audit log [stderr]"},
      {"--audit-code", "also log each cell's code (only its hash and size otherwise)"},
      {"--metrics FILE", "keep a Prometheus textfile of cells, limits, egress, restarts"},
      {"--isolation MODE", "strict | degraded | none [strict]"},
      {"--active-output MODE", "isolate | strip | allow output that can run script [isolate]"}};
  return help;
}

}  // namespace belljar
