#pragma once
// The sandbox policy: what a session may touch, reach and spend.
// Sources, later ones winning: built-in defaults < --policy FILE (JSON) < flags.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandbox/os/usage_error.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

enum class Isolation { strict, degraded, none };

// `--audit-log -`: the records on the kernel's stderr.
inline constexpr std::string_view kAuditLogStderr = "-";

// What happens to output that could run code in the user's browser (scripts, event handlers,
// javascript: URLs...): run in a sandboxed frame with an opaque origin, removed, or passed.
enum class ActiveOutput { isolate, strip, allow };

struct HostRule {
  std::string host;             // "example.com", "*.example.com", "10.0.0.5", "::1"
  std::vector<uint16_t> ports;  // {80, 443} when none was given
  bool local = false;           // --allow-local-net: may resolve to loopback/private addresses
  std::string secret;           // a rule implied by --secret: that flag as written
  std::string text() const;     // as the user wrote it, for logs and 403 bodies
};

// --secret NAME@HOST[:PORT] or --secret-file NAME=PATH@HOST[:PORT]: a value the sandbox never
// holds. Inside, NAME is a placeholder; the egress proxy puts the value into requests to HOST
// (sandbox/egress_api/bound_secrets.hpp). The binding implies --allow-net HOST:PORT.
struct SecretBinding {
  std::string name;
  std::string file;          // absolute; empty: the value is the kernel's environment variable NAME
  HostRule host;             // one port: 443 unless given
  std::string text() const;  // "NAME@HOST:PORT", or "NAME=PATH@HOST:PORT" for a file
  std::string flag_text() const;  // "--secret NAME@HOST:PORT" / "--secret-file ..."
};

struct Policy {
  std::filesystem::path workspace;  // absolute; the one writable directory
  std::vector<std::filesystem::path> read_only;
  // --ro as given (absolute, links kept): the links on its way are protected names
  // (jail_plan.hpp, read_only_link_patterns).
  std::vector<std::filesystem::path> read_only_given;
  std::vector<std::string> hide;  // extra globs, on top of the defaults
  // The kernel's own files (its connection file): never readable inside, masked where they lie
  // in the workspace. Set by the command line, not a flag.
  std::vector<std::filesystem::path> kernel_files;
  std::vector<std::string> protect;   // extra read-only globs, on top of the defaults
  std::vector<std::string> writable;  // paths the workspace rule opens (--writable)
  std::vector<HostRule> allow_net;
  std::vector<std::string> pass_env;
  std::vector<std::pair<std::string, std::string>> set_env;
  std::vector<SecretBinding> secrets;
  // --upstream-ca: CA files the egress proxy also trusts when it verifies a --secret host's
  // certificate. The host's trust store is read by its path, never through SSL_CERT_FILE or
  // SSL_CERT_DIR: no variable of the kernel's environment decides where a secret may go.
  std::vector<std::filesystem::path> upstream_ca;
  // --policy FILE, absolute (empty: none). Read again by every process the policy starts (a
  // Jupyter restart, each MCP session): never where the sandbox can write (host_files.hpp).
  std::filesystem::path policy_file;
  double timeout_seconds = 60;
  std::optional<double> cpu_seconds;  // per cell; the timeout when unset
  // Time a cell may spend paused in the debugger without it counting toward the timeout.
  double debug_pause_seconds = 3600;
  uint64_t memory_bytes = 1ull << 30;
  uint64_t pids = 256;
  uint64_t open_files = 4096;  // RLIMIT_NOFILE of each process in the sandbox
  uint64_t file_size_bytes = 1ull << 30;
  uint64_t tmp_size_bytes = 256ull << 20;
  uint64_t output_limit_bytes = 10ull << 20;
  uint64_t workspace_quota_bytes = 1ull << 30;  // what a session may add to the workspace; 0: none
  std::string python;                           // resolved to an absolute path
  std::string sandbox_user;                     // empty: "nobody" when root, else unused
  // kAuditLogStderr, a path, or empty: the command's default (a file in the user's state
  // directory for kernel and mcp: kernel/observability/audit_destination.hpp).
  std::string audit_log;
  bool audit_code = false;      // log the code itself, not only its hash
  bool audit_required = false;  // cells are refused once an audit record could not be written
  // --bench-unbrokered-workspace: no workspace broker, for bench/workspace.py's comparison
  // only. A flag, so it is in the kernelspec's argv, the banner and kernel_info (the warden's
  // note), never in an environment a server, spawner or gateway can add to.
  bool bench_unbrokered_workspace = false;
  std::string metrics_file;      // Prometheus textfile; empty: none
  uint64_t history_size = 1000;  // cells history requests reach (history.hpp)
  uint64_t checkpoints = 8;      // checkpoints a session keeps (kernel/session/checkpoints.hpp)
  Isolation isolation = Isolation::strict;
  ActiveOutput active_output = ActiveOutput::isolate;

  double cpu_limit() const { return cpu_seconds.value_or(timeout_seconds); }
  nlohmann::json summary() const;  // for kernel_info, logs, the audit record
};

// The secret patterns always masked inside the workspace (DESIGN: secrets stripped).
const std::vector<std::string>& default_hidden_patterns();
// Files and directories that host tools execute or obey (git, direnv, editors, shells), kept
// read-only inside the sandbox unless lifted with --writable.
const std::vector<std::string>& default_protected_patterns();
// The read-only patterns in force for this policy: defaults less --writable, plus --protect.
std::vector<std::string> protected_patterns(const Policy& policy);

// Value parsers, each throwing UsageError naming the flag and the bad value. parse_size and
// parse_duration, the grammar of every size and duration, are in quantities.hpp.
HostRule parse_host_rule(const std::string& flag, const std::string& text);  // host[:port]
// NAME@HOST[:PORT] (from_file false) or NAME=PATH@HOST[:PORT]; the port is 443 unless given.
SecretBinding parse_secret_binding(const std::string& flag, const std::string& text,
                                   bool from_file);
Isolation parse_isolation(const std::string& text);
std::string isolation_name(Isolation isolation);
ActiveOutput parse_active_output(const std::string& text);
std::string active_output_name(ActiveOutput mode);

// Collects policy flags from a command line. Each command's own flags are handled by the
// caller; take() answers whether argv[i] (and maybe argv[i+1]) was a policy flag.
class PolicyBuilder {
 public:
  PolicyBuilder();
  // Returns the number of argv entries consumed (0: not a policy flag).
  int take(const std::vector<std::string>& args, size_t i);
  // Applies --policy FILE first, then the flags in order; resolves paths and the python.
  Policy build() const;
  // The flags as given (--policy FILE made absolute), in pairs of flag and value.
  const std::vector<std::string>& given() const { return given_; }
  // The flags for kernel.json's argv: as given, paths made absolute, then each default that is
  // resolved at install time (the python on PATH) and was not given, from POLICY (what build()
  // returned). `inline_policy_file`: the policy file's settings in its place, read once now (the
  // MCP router's sessions: a session started later reads no file the sandbox could have moved
  // or rewritten meanwhile, and no path relative to a folder it could have renamed).
  std::vector<std::string> kernel_argv(const Policy& policy, bool inline_policy_file = false) const;

 private:
  std::vector<std::string> given_;
  std::optional<std::string> policy_file_;
};

// Every policy flag with its argument placeholder and meaning (default in brackets), for
// --help; derived from the one table in policy_flags.hpp.
const std::vector<std::pair<std::string, std::string>>& policy_flag_help();

}  // namespace belljar
