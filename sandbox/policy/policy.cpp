#include "sandbox/policy/policy.hpp"

#include <arpa/inet.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "sandbox/os/host_port.hpp"
#include "sandbox/policy/policy_flags.hpp"

namespace belljar {
namespace fs = std::filesystem;

namespace {

// A --policy file: one JSON object whose keys are the flags' file keys (policy_flags.hpp).
// Returns (flag, value) pairs in file order, each value spelt as on the command line.
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
    const PolicyFlag* flag = find_policy_file_key(raw_key);
    std::string key = raw_key;
    std::replace(key.begin(), key.end(), '_', '-');
    if (!flag) throw UsageError("--policy " + file + ": unknown setting \"" + key + "\"");
    const std::string name(flag->name);
    auto scalar = [&](const nlohmann::json& v) {
      if (v.is_string()) return v.get<std::string>();
      if (v.is_number() || v.is_boolean()) return v.dump();
      throw UsageError("--policy " + file + ": \"" + key + "\" must be a string or number");
    };
    if (value.is_array()) {
      if (!flag->repeatable)
        throw UsageError("--policy " + file + ": \"" + key + "\" takes one value, not a list");
      for (auto& item : value) settings.emplace_back(name, scalar(item));
    } else if (value.is_object() && flag->kind == FlagValue::env_assignment) {
      for (auto& [env, v] : value.items()) settings.emplace_back(name, env + "=" + scalar(v));
    } else {
      settings.emplace_back(name, scalar(value));
    }
  }
  return settings;
}

// A bound secret's value must never reach the sandbox by another road, and one name has one
// value: --pass-env or --set-env of the same name, or an environment variable and a file for
// it, is a contradiction the user has to resolve.
void check_secret_bindings(const Policy& policy) {
  for (const auto& binding : policy.secrets) {
    const std::string& name = binding.name;
    if (std::find(policy.pass_env.begin(), policy.pass_env.end(), name) != policy.pass_env.end())
      throw UsageError(binding.flag_text() + ": --pass-env " + name +
                       " would put the value itself in the sandbox; drop one of them");
    for (const auto& [set, value] : policy.set_env)
      if (set == name)
        throw UsageError(binding.flag_text() + ": --set-env " + name +
                         " would replace its placeholder; drop one of them");
    for (const auto& other : policy.secrets)
      if (other.name == name && other.file != binding.file)
        throw UsageError(binding.flag_text() + ": " + name + " is also bound as " +
                         other.flag_text() + "; one name has one value");
  }
}

void apply(Policy& policy, const std::string& flag, const std::string& value) {
  const PolicyFlag* entry = find_policy_flag(flag);
  if (!entry || !entry->apply) throw UsageError("unknown policy flag " + flag);
  entry->apply(policy, flag, value);
}

}  // namespace

std::string HostRule::text() const {
  if (ports.size() == 2 && ports[0] == 80 && ports[1] == 443) return bracketed_host(host);
  return host_port(host, ports.front());
}

const std::vector<std::string>& default_hidden_patterns() {
  static const std::vector<std::string> patterns = {
      ".env", ".env.*", ".ssh", ".aws", ".netrc", ".git-credentials", ".pypirc", ".npmrc",
      ".docker/config.json", ".kube", "*.pem", "*.key", "id_rsa*", "id_ed25519*",
      // Jupyter's runtime directory, in a workspace that holds a home: every kernel's connection
      // file (its key) and the server's jpserver-*.json (its token: a terminal on the host)
      "jupyter/runtime"};
  return patterns;
}

const std::vector<std::string>& default_protected_patterns() {
  static const std::vector<std::string> patterns = {
      // git runs hooks, fsmonitor, pagers and filters named in .git (config, hooks, commondir,
      // a worktree's gitdir file) and fetches what .gitmodules names
      ".git", ".gitmodules",
      // direnv and mise run these on cd; editors run tasks and interpreters named in theirs
      ".envrc", ".mise.toml", ".vscode", ".idea", ".pre-commit-config.yaml",
      // VS Code's multi-root workspace file: .vscode's settings and tasks, by another name
      "*.code-workspace",
      // shells' start-up files, for a workspace that is (or holds) a home directory
      ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
      ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".config/fish", "/.config/autostart",
      "/.config/systemd", "/.local/bin"};
  return patterns;
}

namespace {

// Whether `workspace` is the home of the user running the kernel, by $HOME (what a login shell's
// ~/.profile reads) or by the password database.
bool users_home(const fs::path& workspace) {
  std::error_code ec;
  auto same = [&](const char* home) {
    return home && *home == '/' && fs::equivalent(workspace, home, ec);
  };
  const passwd* entry = ::getpwuid(::geteuid());
  return same(::getenv("HOME")) || (entry && same(entry->pw_dir));
}

}  // namespace

std::vector<std::string> protected_patterns(const Policy& policy) {
  std::vector<std::string> patterns;
  auto lifted = [&](const std::string& pattern) {
    return std::find(policy.writable.begin(), policy.writable.end(), pattern) !=
           policy.writable.end();
  };
  for (const auto& pattern : default_protected_patterns())
    if (!lifted(pattern)) patterns.push_back(pattern);
  // A workspace that is the user's home: Debian's ~/.profile puts ~/bin first on a login
  // shell's PATH, so a `bin/git` the sandbox left there would run as the host's next git (the
  // outside attack on round three).
  if (!policy.workspace.empty() && users_home(policy.workspace) && !lifted("/bin"))
    patterns.push_back("/bin");
  patterns.insert(patterns.end(), policy.protect.begin(), policy.protect.end());
  return patterns;
}

HostRule parse_host_rule(const std::string& flag, const std::string& text) {
  const std::string bad =
      flag + " " + text + ": expected HOST[:PORT], *.DOMAIN[:PORT] or [IPv6][:PORT]";
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
    if (text.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos)
      throw UsageError(bad);
  } else if (auto colon = text.find(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) throw UsageError(bad);
  }
  if (host.empty() || host.size() > 253) throw UsageError(bad);
  if (host.find(':') == std::string::npos) {
    std::string name = host;
    if (name.rfind("*.", 0) == 0) name = name.substr(2);
    if (name.empty() || name.front() == '.' || name.back() == '.' ||
        name.find("..") != std::string::npos)
      throw UsageError(bad);
    for (char c : name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.'))
        throw UsageError(bad);
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

std::string SecretBinding::text() const {
  return name + (file.empty() ? "" : "=" + file) + "@" + host_port(host.host, host.ports.front());
}

std::string SecretBinding::flag_text() const {
  return (file.empty() ? "--secret " : "--secret-file ") + text();
}

SecretBinding parse_secret_binding(const std::string& flag, const std::string& text,
                                   bool from_file) {
  const std::string shape = from_file ? "NAME=PATH@HOST[:PORT]" : "NAME@HOST[:PORT]";
  // The host is after the last '@': a path may hold one, a host never does.
  auto at = text.rfind('@');
  if (at == std::string::npos || at + 1 == text.size())
    throw UsageError(flag + " " + text + ": expected " + shape);
  SecretBinding binding;
  std::string subject = text.substr(0, at);
  if (from_file) {
    auto eq = subject.find('=');
    if (eq == std::string::npos || eq + 1 == subject.size())
      throw UsageError(flag + " " + text + ": expected " + shape);
    binding.file = fs::absolute(subject.substr(eq + 1)).lexically_normal().string();
    subject = subject.substr(0, eq);
  }
  binding.name = subject;
  bool name_ok = !subject.empty() && !std::isdigit(static_cast<unsigned char>(subject[0]));
  for (char c : subject)
    name_ok = name_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!name_ok)
    throw UsageError(flag + " " + text + ": \"" + subject + "\" is not a variable name");
  const std::string host = text.substr(at + 1);
  try {
    binding.host = parse_host_rule(flag, host);
  } catch (const UsageError& e) {
    // "FLAG HOST: why" names the whole binding instead.
    std::string why = std::string(e.what()).substr(flag.size() + 1 + host.size());
    throw UsageError(flag + " " + text + why);
  }
  // Port 443 unless one was given: a secret goes only over TLS (parse_host_rule's "none" is
  // 80 and 443).
  if (binding.host.ports.size() > 1) binding.host.ports = {443};
  binding.host.secret = binding.flag_text();
  return binding;
}

Isolation parse_isolation(const std::string& text) {
  if (text == "strict") return Isolation::strict;
  if (text == "degraded") return Isolation::degraded;
  if (text == "none") return Isolation::none;
  throw UsageError("--isolation " + text + ": expected strict, degraded or none");
}

std::string isolation_name(Isolation isolation) {
  switch (isolation) {
    case Isolation::strict:
      return "strict";
    case Isolation::degraded:
      return "degraded";
    case Isolation::none:
      return "none";
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
    case ActiveOutput::isolate:
      return "isolate";
    case ActiveOutput::strip:
      return "strip";
    case ActiveOutput::allow:
      return "allow";
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
  nlohmann::json bound = nlohmann::json::array();
  for (auto& binding : secrets) bound.push_back(binding.text());  // names, never the values
  nlohmann::json upstream = nlohmann::json::array();
  for (auto& path : upstream_ca) upstream.push_back(path.string());
  return {{"isolation", isolation_name(isolation)},
          {"active_output", active_output_name(active_output)},
          {"workspace", workspace.string()},
          {"read_only", ro},
          {"hide", hide},
          {"protect", protected_patterns(*this)},
          {"allow_net", hosts},
          {"pass_env", pass_env},
          {"set_env", set_names},
          {"secrets", bound},
          {"upstream_ca", upstream},
          {"timeout_seconds", timeout_seconds},
          {"cpu_seconds", cpu_limit()},
          {"debug_pause_seconds", debug_pause_seconds},
          {"memory_bytes", memory_bytes},
          {"pids", pids},
          {"open_files", open_files},
          {"file_size_bytes", file_size_bytes},
          {"tmp_size_bytes", tmp_size_bytes},
          {"output_limit_bytes", output_limit_bytes},
          {"workspace_quota_bytes", workspace_quota_bytes},
          {"history_size", history_size},
          {"checkpoints", checkpoints},
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
  const PolicyFlag* flag = find_policy_flag(arg);
  if (!flag) return 0;
  if (flag->kind == FlagValue::toggle && !inline_value) {
    value = "true";
  } else if (!inline_value) {
    if (i + 1 >= args.size()) throw UsageError(arg + ": missing value");
    value = args[i + 1];
  }
  if (flag->kind == FlagValue::policy_file) {
    // Absolute, so kernel.json finds it whatever directory Jupyter starts the kernel in.
    value = fs::absolute(value).string();
    policy_file_ = value;
  } else {
    // Validate now so a bad value is reported where it was typed.
    Policy scratch;
    apply(scratch, arg, value);
  }
  given_.push_back(arg);
  given_.push_back(value);
  return inline_value || flag->kind == FlagValue::toggle ? 1 : 2;
}

Policy PolicyBuilder::build() const {
  Policy policy;
  std::error_code ec;
  policy.workspace = fs::current_path(ec);
  if (ec) throw UsageError("cannot read the working directory: " + ec.message());
  if (policy_file_) {
    policy.policy_file = fs::absolute(*policy_file_, ec);
    for (auto& [flag, value] : read_policy_file(*policy_file_)) apply(policy, flag, value);
  }
  for (size_t i = 0; i + 1 < given_.size(); i += 2)
    if (given_[i] != "--policy") apply(policy, given_[i], given_[i + 1]);
  if (policy.python.empty()) apply(policy, "--python", "python3");
  check_secret_bindings(policy);
  return policy;
}

std::vector<std::string> PolicyBuilder::kernel_argv(const Policy& policy,
                                                    bool inline_policy_file) const {
  std::vector<std::string> argv;
  auto emit = [&](const std::string& name, const std::string& value) {
    // A toggle takes no separate value: "--audit-code true" would leave "true" as a stray word.
    FlagValue kind = find_policy_flag(name)->kind;
    if (kind == FlagValue::toggle) {
      argv.push_back(name + "=" + value);
    } else if (kind == FlagValue::secret_file) {
      argv.push_back(name);  // NAME=PATH@HOST with PATH made absolute
      argv.push_back(parse_secret_binding(name, value, true).text());
    } else if (kind == FlagValue::log_file && value == kAuditLogStderr) {
      argv.push_back(name);  // stderr wherever the kernel starts
      argv.push_back(value);
    } else if (kind == FlagValue::directory || kind == FlagValue::path || kind == FlagValue::file ||
               kind == FlagValue::log_file || kind == FlagValue::policy_file) {
      // Paths mean what they meant where install ran, not wherever Jupyter starts the kernel.
      fs::path path = fs::absolute(value).lexically_normal();
      if (!path.has_filename() && path != path.root_path()) path = path.parent_path();  // "./"
      argv.push_back(name);
      argv.push_back(path.string());
    } else {
      argv.push_back(name);
      argv.push_back(value);
    }
  };
  for (size_t i = 0; i + 1 < given_.size(); i += 2) {
    // Inlined: the file's settings as flags, read once now, in the place the file had (before
    // the command line's, which win): what the sandbox writes later is read by no one.
    if (inline_policy_file && given_[i] == "--policy") {
      for (const auto& [flag, value] : read_policy_file(given_[i + 1])) emit(flag, value);
      continue;
    }
    emit(given_[i], given_[i + 1]);
  }
  auto given = [&](std::string_view name) {
    for (size_t i = 0; i < given_.size(); i += 2)
      if (given_[i] == name) return true;
    return false;
  };
  for (const auto& flag : policy_flags()) {
    if (!flag.baked_when_absent || given(flag.name)) continue;
    argv.emplace_back(flag.name);
    argv.push_back(policy.*flag.baked_when_absent);
  }
  return argv;
}

}  // namespace belljar
