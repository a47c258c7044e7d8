#include "sandbox/policy/policy_flags.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "sandbox/policy/interpreter.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {
namespace fs = std::filesystem;

namespace {

bool valid_env_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

fs::path existing_path(const std::string& flag, const std::string& text, bool must_be_dir) {
  if (text.empty()) throw UsageError(flag + ": empty path");
  std::error_code ec;
  fs::path path = fs::weakly_canonical(fs::absolute(text), ec);
  if (ec) throw UsageError(flag + " " + text + ": " + ec.message());
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw UsageError(flag + " " + text + ": no such file or directory");
  if (must_be_dir && !S_ISDIR(st.st_mode))
    throw UsageError(flag + " " + text + ": not a directory");
  return path;
}

std::string written_file(const std::string& flag, const std::string& text) {
  if (text.empty()) throw UsageError(flag + ": empty path");
  return fs::absolute(text).string();
}

std::string log_file(const std::string& flag, const std::string& text) {
  return text == kAuditLogStderr ? text : written_file(flag, text);
}

std::string pattern(const std::string& flag, const std::string& text) {
  if (text.empty() || text.find('\0') != std::string::npos)
    throw UsageError(flag + ": empty pattern");
  return text;
}

std::string sandbox_user(const std::string& flag, const std::string& value) {
  if (value.empty()) throw UsageError(flag + ": empty user");
  if (value == "root" || value == "0")
    throw UsageError(flag + " " + value + ": code never runs as root");
  if (!::getpwnam(value.c_str())) {
    // A numeric uid: digits only, a real uid (not 0, not the (uid_t)-1 "no change" value).
    bool digits =
        value.size() <= 10 &&
        std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); });
    unsigned long long uid = digits ? std::strtoull(value.c_str(), nullptr, 10) : 0;
    if (!digits || uid == 0 || uid >= 4294967295ull)
      throw UsageError(flag + " " + value + ": no such user");
  }
  return value;
}

// --open-files (RLIMIT_NOFILE of each process inside): a kernel's worker needs 9 descriptors to
// start (8: the kernel dies before its first reply) and 12 to show a %matplotlib inline plot, so
// fewer than 16 would be a session that cannot work. No more than Linux's default fs.nr_open.
constexpr uint64_t kMinOpenFiles = 16;
constexpr uint64_t kMaxOpenFiles = 1048576;

// A whole number from `low` to `high`; `what` names what it counts, for the error.
uint64_t count_within(const std::string& flag, const std::string& value, uint64_t low,
                      uint64_t high, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno || n < low || n > high || value[0] == '-')
    throw UsageError(flag + " " + value + ": expected a number of " + what + " from " +
                     std::to_string(low) + " to " + std::to_string(high));
  return n;
}

std::pair<std::string, std::string> env_assignment(const std::string& flag,
                                                   const std::string& value) {
  auto eq = value.find('=');
  if (eq == std::string::npos || !valid_env_name(value.substr(0, eq)))
    throw UsageError(flag + " " + value.substr(0, eq) + ": expected NAME=VALUE");
  return {value.substr(0, eq), value.substr(eq + 1)};
}

// The binding, and the allowlist rule it implies (naming the binding in the audit log).
void bind_secret(Policy& policy, SecretBinding binding) {
  policy.allow_net.push_back(binding.host);
  policy.secrets.push_back(std::move(binding));
}

bool toggle(const std::string& flag, const std::string& value) {
  if (value != "true" && value != "false") throw UsageError(flag + ": expected true or false");
  return value == "true";
}

using Apply = void (*)(Policy&, const std::string&, const std::string&);

// The defaults shown here are the Policy's member initialisers (policy.hpp); the unit test
// "the defaults the table shows are the Policy's own" holds the two together.
const std::array kFlags = {
    PolicyFlag{
        .name = "--policy",
        .placeholder = "FILE",
        .kind = FlagValue::policy_file,
        .fallback = "none",
        .meaning =
            "JSON file with the same settings, named without the dashes (flags override it); "
            "refused where the sandbox can write, or with a second name (a hard link)"},
    PolicyFlag{.name = "--workspace",
               .placeholder = "DIR",
               .kind = FlagValue::directory,
               .fallback = "the working directory at launch",
               .meaning = "the one writable directory, mounted at its own path",
               .file_key = "workspace",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.workspace = existing_path(f, v, true); }},
    PolicyFlag{.name = "--ro",
               .placeholder = "PATH",
               .kind = FlagValue::path,
               .repeatable = true,
               .fallback = "none",
               .meaning = "extra read-only path (repeatable)",
               .file_key = "ro",
               .apply =
                   [](Policy& p, const std::string& f, const std::string& v) {
                     p.read_only.push_back(existing_path(f, v, false));
                     p.read_only_given.push_back(fs::absolute(v));
                   }},
    PolicyFlag{
        .name = "--hide",
        .placeholder = "GLOB",
        .kind = FlagValue::glob,
        .repeatable = true,
        .fallback = "none",
        .meaning =
            "extra pattern masked inside the workspace (repeatable; the defaults always apply)",
        .file_key = "hide",
        .apply = [](Policy& p, const std::string& f,
                    const std::string& v) { p.hide.push_back(pattern(f, v)); }},
    PolicyFlag{.name = "--protect",
               .placeholder = "GLOB",
               .kind = FlagValue::glob,
               .repeatable = true,
               .fallback = "none",
               .meaning =
                   "extra pattern kept read-only inside the workspace (repeatable; the defaults "
                   "always apply)",
               .file_key = "protect",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.protect.push_back(pattern(f, v)); }},
    PolicyFlag{
        .name = "--writable",
        .placeholder = "GLOB",
        .kind = FlagValue::glob,
        .repeatable = true,
        .fallback = "none",
        .meaning =
            "open a path the workspace rule closes (a dot-path, a Python environment, a default "
            "read-only pattern) and everything below it, e.g. --writable .git to commit from "
            "inside, --writable .cache/myproject (repeatable)",
        .file_key = "writable",
        .apply = [](Policy& p, const std::string& f,
                    const std::string& v) { p.writable.push_back(pattern(f, v)); }},
    PolicyFlag{
        .name = "--allow-net",
        .placeholder = "HOST[:PORT]",
        .kind = FlagValue::host,
        .repeatable = true,
        .fallback = "none",
        .meaning = "egress allowed to HOST (repeatable; *.example.com; ports 80 and 443 if none)",
        .file_key = "allow-net",
        .apply = [](Policy& p, const std::string& f,
                    const std::string& v) { p.allow_net.push_back(parse_host_rule(f, v)); }},
    PolicyFlag{.name = "--allow-local-net",
               .placeholder = "HOST[:PORT]",
               .kind = FlagValue::host,
               .repeatable = true,
               .fallback = "none",
               .meaning =
                   "like --allow-net, and HOST may resolve to loopback or private addresses (a LAN "
                   "service, localhost)",
               .file_key = "allow-local-net",
               .apply =
                   [](Policy& p, const std::string& f, const std::string& v) {
                     HostRule rule = parse_host_rule(f, v);
                     rule.local = true;
                     p.allow_net.push_back(rule);
                   }},
    PolicyFlag{.name = "--pass-env",
               .placeholder = "NAME",
               .kind = FlagValue::env_name,
               .repeatable = true,
               .fallback = "none",
               .meaning = "pass this environment variable into the sandbox (repeatable)",
               .file_key = "pass-env",
               .apply =
                   [](Policy& p, const std::string& f, const std::string& v) {
                     if (!valid_env_name(v))
                       throw UsageError(f + " " + v + ": not a variable name");
                     p.pass_env.push_back(v);
                   }},
    PolicyFlag{
        .name = "--set-env",
        .placeholder = "NAME=VALUE",
        .kind = FlagValue::env_assignment,
        .repeatable = true,
        .fallback = "none",
        .meaning =
            "set this variable inside the sandbox (repeatable; logs name it, never its value)",
        .file_key = "set-env",
        .apply = [](Policy& p, const std::string& f,
                    const std::string& v) { p.set_env.push_back(env_assignment(f, v)); }},
    PolicyFlag{
        .name = "--secret",
        .placeholder = "NAME@HOST[:PORT]",
        .kind = FlagValue::secret,
        .repeatable = true,
        .fallback = "none",
        .meaning =
            "the sandbox's NAME is a placeholder; the egress proxy puts the kernel's own $NAME "
            "into HTTPS requests to HOST (port 443 if none; repeatable; implies --allow-net)",
        .file_key = "secret",
        .apply = [](Policy& p, const std::string& f,
                    const std::string& v) { bind_secret(p, parse_secret_binding(f, v, false)); }},
    PolicyFlag{
        .name = "--secret-file",
        .placeholder = "NAME=PATH@HOST[:PORT]",
        .kind = FlagValue::secret_file,
        .repeatable = true,
        .fallback = "none",
        .meaning = "like --secret, the value read from the file PATH at start",
        .file_key = "secret-file",
        .apply = [](Policy& p, const std::string& f,
                    const std::string& v) { bind_secret(p, parse_secret_binding(f, v, true)); }},
    PolicyFlag{
        .name = "--upstream-ca",
        .placeholder = "FILE",
        .kind = FlagValue::path,
        .repeatable = true,
        .fallback = "the host's trust store only",
        .meaning = "a CA (PEM) the egress proxy also trusts when it verifies a --secret host "
                   "(repeatable; the host's store, by its path, always; SSL_CERT_FILE and "
                   "SSL_CERT_DIR in the environment never); refused where the sandbox can write",
        .file_key = "upstream-ca",
        .apply = [](Policy& p, const std::string& f,
                    const std::string& v) { p.upstream_ca.push_back(existing_path(f, v, false)); }},
    PolicyFlag{.name = "--timeout",
               .placeholder = "DURATION",
               .kind = FlagValue::duration,
               .fallback = "60s",
               .meaning = "wall-clock limit per cell",
               .file_key = "timeout",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.timeout_seconds = parse_duration(f, v); }},
    PolicyFlag{.name = "--cpu",
               .placeholder = "DURATION",
               .kind = FlagValue::duration,
               .fallback = "the timeout",
               .meaning = "CPU-time limit per cell, CPU spent between cells included",
               .file_key = "cpu",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.cpu_seconds = parse_duration(f, v); }},
    PolicyFlag{.name = "--debug-pause",
               .placeholder = "DURATION",
               .kind = FlagValue::duration,
               .fallback = "1h",
               .meaning = "time per cell stopped at a breakpoint that --timeout does not count; "
                          "past it, paused time counts again",
               .file_key = "debug-pause",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.debug_pause_seconds = parse_duration(f, v); }},
    PolicyFlag{.name = "--memory",
               .placeholder = "SIZE",
               .kind = FlagValue::size,
               .fallback = "1G",
               .meaning = "memory for the session, 32M at least",
               .file_key = "memory",
               .apply =
                   [](Policy& p, const std::string& f, const std::string& v) {
                     p.memory_bytes = parse_size(f, v);
                     if (p.memory_bytes < (32ull << 20))
                       throw UsageError(f + " " + v + ": below the 32M a Python session needs");
                   }},
    PolicyFlag{.name = "--pids",
               .placeholder = "N",
               .kind = FlagValue::count,
               .fallback = "256",
               .meaning = "processes and threads, 8 to 1000000",
               .file_key = "pids",
               .apply =
                   [](Policy& p, const std::string& f, const std::string& v) {
                     p.pids = count_within(f, v, 8, 1000000, "processes");
                   }},
    PolicyFlag{.name = "--open-files",
               .placeholder = "N",
               .kind = FlagValue::count,
               .fallback = "4096",
               .meaning = "files, sockets and pipes a process may hold open, 16 to 1048576",
               .file_key = "open-files",
               .apply =
                   [](Policy& p, const std::string& f, const std::string& v) {
                     p.open_files = count_within(f, v, kMinOpenFiles, kMaxOpenFiles, "open files");
                   }},
    PolicyFlag{.name = "--file-size",
               .placeholder = "SIZE",
               .kind = FlagValue::size,
               .fallback = "1G",
               .meaning = "largest file written",
               .file_key = "file-size",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.file_size_bytes = parse_size(f, v); }},
    PolicyFlag{.name = "--tmp-size",
               .placeholder = "SIZE",
               .kind = FlagValue::size,
               .fallback = "256M",
               .meaning = "private /tmp and /dev/shm",
               .file_key = "tmp-size",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.tmp_size_bytes = parse_size(f, v); }},
    PolicyFlag{.name = "--output-limit",
               .placeholder = "SIZE",
               .kind = FlagValue::size,
               .fallback = "10M",
               .meaning = "output kept per cell",
               .file_key = "output-limit",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.output_limit_bytes = parse_size(f, v); }},
    PolicyFlag{
        .name = "--workspace-quota",
        .placeholder = "SIZE",
        .kind = FlagValue::size,
        .fallback = "1G",
        .meaning = "what the session may add to the workspace, all files together; 0: no limit",
        .file_key = "workspace-quota",
        .apply = [](Policy& p, const std::string& f,
                    const std::string& v) { p.workspace_quota_bytes = parse_size(f, v, 0); }},
    PolicyFlag{
        .name = "--python",
        .placeholder = "PATH",
        .kind = FlagValue::interpreter,
        .fallback = "python3 on PATH, resolved at install time",
        .meaning =
            "interpreter inside the sandbox; a #! script is never run on the host: a pyenv shim "
            "is resolved from its version files, any other script is refused",
        .file_key = "python",
        .apply = [](Policy& p, const std::string& f,
                    const std::string& v) { p.python = resolve_python(f, v); },
        .baked_when_absent = &Policy::python},
    PolicyFlag{.name = "--sandbox-user",
               .placeholder = "USER",
               .kind = FlagValue::user,
               .fallback = "nobody",
               .meaning = "host user the code runs as when the kernel is root",
               .file_key = "sandbox-user",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.sandbox_user = sandbox_user(f, v); }},
    PolicyFlag{.name = "--audit-log",
               .placeholder = "FILE",
               .kind = FlagValue::log_file,
               .fallback = "a file per kernel in ~/.local/state/belljar ($XDG_STATE_HOME/belljar); "
                           "stderr for launch, none for run",
               .meaning = "JSON-lines audit log; - for stderr; refused where the sandbox can "
                          "write (a default state directory there: stderr, with a warning "
                          "saying why)",
               .file_key = "audit-log",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.audit_log = log_file(f, v); }},
    PolicyFlag{.name = "--audit-code",
               .placeholder = "",
               .kind = FlagValue::toggle,
               .fallback = "off",
               .meaning = "also log each cell's code (only its hash and size otherwise)",
               .file_key = "audit-code",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.audit_code = toggle(f, v); }},
    PolicyFlag{.name = "--audit-required",
               .placeholder = "",
               .kind = FlagValue::toggle,
               .fallback = "off",
               .meaning = "refuse cells once an audit record could not be written",
               .file_key = "audit-required",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.audit_required = toggle(f, v); }},
    PolicyFlag{
        .name = "--metrics",
        .placeholder = "FILE",
        .kind = FlagValue::file,
        .fallback = "none",
        .meaning =
            "keep a Prometheus textfile of cells, limits, egress and restarts; refused where "
            "the sandbox can write",
        .file_key = "metrics",
        .apply = [](Policy& p, const std::string& f,
                    const std::string& v) { p.metrics_file = written_file(f, v); }},
    PolicyFlag{
        .name = "--history-size",
        .placeholder = "N",
        .kind = FlagValue::count,
        .fallback = "1000",
        .meaning = "cells a history request (tail, range, search) reaches, the oldest dropped "
                   "first, and fewer once their code and results pass 4M; 0 to 1000000",
        .file_key = "history-size",
        .apply =
            [](Policy& p, const std::string& f, const std::string& v) {
              p.history_size = count_within(f, v, 0, 1000000, "cells");
            }},
    PolicyFlag{
        .name = "--checkpoints",
        .placeholder = "N",
        .kind = FlagValue::count,
        .fallback = "8",
        .meaning = "checkpoints a session keeps (%checkpoint, MCP's checkpoint), the oldest "
                   "dropped with a notice; their memory is charged to --memory; 0 turns them "
                   "off; 0 to 64",
        .file_key = "checkpoints",
        .apply =
            [](Policy& p, const std::string& f, const std::string& v) {
              p.checkpoints = count_within(f, v, 0, 64, "checkpoints");
            }},
    PolicyFlag{
        .name = "--isolation",
        .placeholder = "MODE",
        .kind = FlagValue::choice,
        .fallback = "strict",
        .meaning =
            "strict | degraded | none: strict refuses to start without every layer; none is a "
            "developer mode the banner flags loudly",
        .file_key = "isolation",
        .apply = [](Policy& p, const std::string&,
                    const std::string& v) { p.isolation = parse_isolation(v); }},
    PolicyFlag{
        .name = "--active-output",
        .placeholder = "MODE",
        .kind = FlagValue::choice,
        .fallback = "isolate",
        .meaning =
            "isolate | strip | allow output that could run script in the browser: run it in a "
            "sandboxed frame, remove it with a notice, or (allow, which the banner flags "
            "loudly) pass it unchanged",
        .file_key = "active-output",
        .apply = [](Policy& p, const std::string&,
                    const std::string& v) { p.active_output = parse_active_output(v); }},
    PolicyFlag{.name = "--bench-unbrokered-workspace",
               .placeholder = "",
               .kind = FlagValue::toggle,
               .fallback = "off",
               .meaning = "benchmarks only (bench/workspace.py): no workspace broker, so the "
                          "sandbox may create, rename and remove any name in the workspace; the "
                          "banner and kernel_info say so",
               .file_key = "bench-unbrokered-workspace",
               .apply = [](Policy& p, const std::string& f,
                           const std::string& v) { p.bench_unbrokered_workspace = toggle(f, v); }},
};

// A markdown table cell: '|' would end the cell and '*' start emphasis.
std::string markdown_cell(std::string_view text) {
  std::string cell;
  for (char c : text) {
    if (c == '|' || c == '*') cell += '\\';
    cell += c;
  }
  return cell;
}

}  // namespace

std::string PolicyFlag::usage() const {
  std::string text(name);
  if (!placeholder.empty()) text += " " + std::string(placeholder);
  return text;
}

std::span<const PolicyFlag> policy_flags() {
  return kFlags;
}

const PolicyFlag* find_policy_flag(std::string_view name) {
  for (const auto& flag : kFlags)
    if (flag.name == name) return &flag;
  return nullptr;
}

const PolicyFlag* find_policy_file_key(std::string key) {
  // "allow-net" as on the command line, or "allow_net" as in the audit log's policy summary.
  std::replace(key.begin(), key.end(), '_', '-');
  for (const auto& flag : kFlags)
    if (!flag.file_key.empty() && flag.file_key == key) return &flag;
  return nullptr;
}

const std::vector<std::pair<std::string, std::string>>& policy_flag_help() {
  static const auto help = [] {
    std::vector<std::pair<std::string, std::string>> lines;
    for (const auto& flag : kFlags)
      lines.emplace_back(flag.usage(),
                         std::string(flag.meaning) + " [" + std::string(flag.fallback) + "]");
    return lines;
  }();
  return help;
}

std::string policy_flags_markdown() {
  std::string table = "| flag | default | meaning |\n| --- | --- | --- |\n";
  for (const auto& flag : kFlags)
    table += "| `" + flag.usage() + "` | " + markdown_cell(flag.fallback) + " | " +
             markdown_cell(flag.meaning) + " |\n";
  return table;
}

}  // namespace belljar
