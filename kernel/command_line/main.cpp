// belljar: the command line. Every failure at this edge is one line and exit status 2
// (bad usage) or 1 (the sandbox can't be had); the kernel itself never dies of a request.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernel/command_line/command_line.hpp"
#include "kernel/command_line/kernelspec.hpp"
#include "kernel/command_line/resources.hpp"
#include "kernel/jupyter/jupyter_frontend.hpp"
#include "kernel/launch/gateway_frontend.hpp"
#include "kernel/launch/gateway_launch.hpp"
#include "kernel/mcp/mcp_frontend.hpp"
#include "kernel/mcp_http/http_server.hpp"
#include "kernel/mcp_router/router_loop.hpp"
#include "kernel/mcp_router/stdio_client.hpp"
#include "kernel/observability/audit_destination.hpp"
#include "kernel/observability/host_files.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/connection_file.hpp"
#include "kernel/run/run_frontend.hpp"
#include "kernel/session/kernel.hpp"
#include "sandbox/jail_client/host_check.hpp"
#include "sandbox/jail_client/jail_helper.hpp"
#include "sandbox/jail_client/jail_plan.hpp"
#include "sandbox/os/installed_file.hpp"
#include "sandbox/os/setup_error.hpp"
#include "sandbox/policy/policy_flags.hpp"

using namespace belljar;

namespace {

// The command line's own text, through stdio: no iostreams in the supervisor (their locale
// machinery alone keeps about half a megabyte of libstdc++ resident in every kernel).
void say(FILE* stream, const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}

int run_kernel(const CommandLine& cl) {
  ConnectionInfo connection = read_connection_file(cl.connection_file);
  KernelOptions options;
  options.policy = cl.policy.build();
  options.policy.kernel_files.push_back(std::filesystem::absolute(cl.connection_file));
  options.launch = worker_launch(options.policy);
  options.egress_module = egress_module_path();
  options.session_id = new_uuid();
  Kernel kernel(options);  // before the frontend: its ZMQ threads must inherit the signal mask
  JupyterFrontend frontend(connection, options.session_id);
  connection.key.assign(connection.key.size(), '\0');
  return kernel.run(frontend);
}

KernelOptions session_options(const CommandLine& cl) {
  KernelOptions options;
  options.policy = cl.policy.build();
  options.launch = worker_launch(options.policy);
  options.egress_module = egress_module_path();
  options.session_id = new_uuid();
  if (options.policy.isolation == Isolation::none)
    say(stderr,
        "belljar: WARNING: --isolation none: the code runs with your privileges, environment "
        "and network\n");
  return options;
}

// A pod's policy flags come from its kernelspec's env (install --kubernetes writes
// BELLJAR_POLICY_FLAGS, a JSON list): before the command line's own, which win.
void insert_pod_policy_flags(std::vector<std::string>& args) {
  const char* text = std::getenv("BELLJAR_POLICY_FLAGS");
  if (!text || !*text) return;
  std::string why;
  auto flags = parse_bounded_json(text, &why);
  if (!flags || !flags->is_array())
    throw UsageError("BELLJAR_POLICY_FLAGS: not a JSON list of policy flags");
  std::vector<std::string> given;
  for (auto& flag : *flags) {
    if (!flag.is_string()) throw UsageError("BELLJAR_POLICY_FLAGS: not a JSON list of strings");
    given.push_back(flag.get<std::string>());
  }
  // Only policy flags: the launch's own (--kernel-id, ...) are the gateway's to give.
  PolicyBuilder check;
  for (size_t i = 0; i < given.size();) {
    int used = check.take(given, i);
    if (used == 0) throw UsageError("BELLJAR_POLICY_FLAGS: " + given[i] + " is not a policy flag");
    i += static_cast<size_t>(used);
  }
  args.insert(args.begin() + 1, given.begin(), given.end());
}

// `belljar launch`: a kernel a gateway (Enterprise Gateway, gateway_provisioners) started in a
// pod. It makes its own key, binds within the gateway's port range, and once the sandbox stands
// sends the sealed connection info back; then it serves like `belljar kernel`.
int run_launch(const CommandLine& cl) {
  GatewayLaunch launch = resolve_gateway_launch(
      cl.launch, [](const char* name) { return std::getenv(name); }, gateway_module_path());
  KernelOptions options = session_options(cl);
  // A pod's stderr is its log (kubectl logs, the cluster's collector); a file in the container
  // would go with the pod unseen.
  if (options.policy.audit_log.empty()) options.policy.audit_log = kAuditLogStderr;
  ConnectionInfo connection;
  connection.transport = "tcp";
  connection.ip = launch.ip;
  connection.key = new_uuid();  // the gateway's own launchers use a uuid4 too
  connection.signature_scheme = "hmac-sha256";
  Kernel kernel(options);  // before the frontend: its ZMQ threads must inherit the signal mask
  JupyterFrontend jupyter(connection, options.session_id, launch.ports);
  CommPort comm_port(launch.ip, launch.ports);
  std::string sealed = launch.sealer->seal(
      gateway_connection_info(connection, comm_port.port(), launch.kernel_id).dump());
  connection.key.assign(connection.key.size(), '\0');
  GatewayFrontend frontend(jupyter, comm_port, launch.response, std::move(sealed));
  return kernel.run(frontend);
}

// `belljar mcp --http`: the router behind MCP's Streamable HTTP. The token comes from the
// environment, which is then rid of it, so no session's process (nor its sandbox) inherits it.
int serve_mcp_http(const RouterOptions& router, const std::string& address_text,
                   const std::vector<std::string>& proxied_hosts) {
  std::string why;
  McpHttpOptions http;
  http.address = *parse_http_address(address_text, &why);
  http.proxied_hosts = proxied_hosts;
  const char* configured = std::getenv("BELLJAR_MCP_TOKEN");
  http.token = mcp_token_from(configured, &why);
  if (http.token.empty()) throw UsageError(why);
  ::unsetenv("BELLJAR_MCP_TOKEN");
  McpHttpServer server(http);
  const HttpAddress& bound = server.address();
  std::string url = "http://" + bound.url_host() + ":" + std::to_string(bound.port) + "/mcp";
  std::string said = "belljar mcp: serving MCP (Streamable HTTP) at " + url + "\n";
  if (!configured)
    said += "belljar mcp: every request carries the header\n    Authorization: Bearer " +
            http.token + "\n  (set BELLJAR_MCP_TOKEN to choose the token)\n";
  if (!bound.loopback())
    said += "belljar mcp: warning: " + bound.host +
            " is reachable beyond this machine; the token travels in clear text unless TLS is "
            "put in front\n";
  say(stderr, said);
  return serve_mcp_sessions(router, server, {{"http", url}});
}

// `belljar mcp`: a Model Context Protocol server on stdio; stdout carries protocol only. The
// router (kernel/mcp_router) in front of one process per session, each `--one-session`: the
// single-session server, its kernel id the router's to give.
int run_mcp(const CommandLine& cl) {
  if (!cl.one_session) {
    RouterOptions router;
    // Refused flags are said once, here, before any session; each session's process reads the
    // policy file again, so it must lie where no session can rewrite it.
    router.policy = cl.policy.build();
    refuse_untrusted_sources(router.policy);
    // Each session's flags are the router's policy as it stands now: absolute paths, the policy
    // file inlined (the outside pass renamed the router's working folder inside the workspace,
    // and a relative --policy then named a file the sandbox wrote: --isolation none).
    router.session_args = {"mcp"};
    for (auto& arg : cl.policy.kernel_argv(router.policy, true))
      router.session_args.push_back(std::move(arg));
    if (cl.session_folders) {
      std::optional<std::pair<uid_t, gid_t>> owner;
      if (::geteuid() == 0) owner = sandbox_host_ids(router.policy);
      router.folders.emplace(router.policy.workspace, owner);
      if (auto why = router.folders->unusable()) throw UsageError("--session-folders: " + *why);
    }
    router.limits.max_sessions = cl.max_sessions;
    router.limits.idle_timeout =
        std::chrono::milliseconds(static_cast<long long>(cl.idle_timeout_seconds * 1000));
    if (!cl.http) {
      StdioClient stdio;
      return serve_mcp_sessions(router, stdio);
    }
    return serve_mcp_http(router, *cl.http, cl.http_hosts);
  }
  // The router's child: it ends with the router, even one killed outright (its sandbox would
  // otherwise run on, orphaned, to the end of its cell).
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  KernelOptions options = session_options(cl);
  options.session_id = *cl.one_session;
  Kernel kernel(options);
  McpFrontend frontend(kernel, options.policy);
  return kernel.run(frontend);
}

std::string read_code(const CommandLine& cl) {
  if (cl.run_code) return *cl.run_code;
  if (*cl.run_file == "-") return read_to_eof(STDIN_FILENO);
  auto unreadable = [&] {
    return UsageError(*cl.run_file + ": cannot read it: " + std::strerror(errno));
  };
  Fd file(::open(cl.run_file->c_str(), O_RDONLY | O_CLOEXEC));
  struct stat info {};
  if (!file || ::fstat(file.get(), &info) != 0) throw unreadable();
  if (!S_ISREG(info.st_mode)) throw UsageError(*cl.run_file + ": not a regular file");
  std::string code;
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(file.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw unreadable();
    if (n == 0) return code;
    code.append(chunk, static_cast<size_t>(n));
  }
}

// `belljar run`: once, in a fresh sandbox; exit status 0 (ran), 1 (raised), 2 (bad usage).
int run_once(const CommandLine& cl) {
  RunRequest request;
  request.code = read_code(cl);
  request.json_output = cl.json_output;
  request.stdin_is_code = cl.run_file && *cl.run_file == "-";
  KernelOptions options = session_options(cl);
  // A terminal user reads the code's stderr: the audit log goes there only when asked.
  if (options.policy.audit_log.empty()) options.policy.audit_log = "/dev/null";
  request.workspace = options.policy.workspace;
  Kernel kernel(options);
  RunFrontend frontend(kernel, request);
  kernel.run(frontend);
  return frontend.exit_status();
}

// One line for a module: its path, or MISSING and why. False when this policy needs it.
bool report_module(const std::string& label, const std::filesystem::path& path, bool needed) {
  try {
    open_installed_file(path.string(), "the " + label, InstalledKind::module);
    say(stdout, label + ": " + path.string() + "\n");
    return true;
  } catch (const SetupError& e) {
    say(stdout,
        label + ": MISSING: " + e.what() + (needed ? "\n" : " (this policy does not need it)\n"));
    return !needed;
  }
}

// `belljar check`: what this host offers and what the policy would use; 0 only if enforceable.
int run_check(const CommandLine& cl) {
  Policy policy = cl.policy.build();
  const LayerReport& host = host_layers();
  EnforcementPlan plan = plan_enforcement(policy, host);
  say(stdout, describe_check(host, plan));
  // The sandbox's own processes: a kernel that can't start them refuses to start.
  bool helper_ok = true;
  try {
    say(stdout, "jail helper: " + JailHelper::open(jail_helper_path())->path() + "\n");
  } catch (const SandboxError& e) {
    helper_ok = policy.isolation == Isolation::none;
    say(stdout, std::string("jail helper: MISSING: ") + e.what() + "\n");
  }
  // The modules loaded on demand: missing, they fail only the kernels that need them.
  bool egress_ok = report_module("egress module", egress_module_path(),
                                 !policy.allow_net.empty() && policy.isolation != Isolation::none);
  report_module("gateway module (belljar launch)", gateway_module_path(), false);
  // As a kernel would make it: the state directory is made if missing.
  say(stdout, "audit log: " + describe_audit_destination(policy, [](const char* name) {
                return std::getenv(name);
              }) + "\n");
  return plan.enforceable && helper_ok && egress_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // The supervisor holds the connection key: no same-uid process (a degraded-mode worker,
  // say) may ptrace it or read its memory through /proc. Without that, nothing starts.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    say(stderr, std::string("belljar: refusing to start: prctl(PR_SET_DUMPABLE, 0): ") +
                    std::strerror(errno) + "\n");
    return 1;
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args[0] == "launch") insert_pod_policy_flags(args);
    CommandLine cl = parse_command_line(args);
    if (cl.command == "help") {
      say(stdout, usage_text());
      return 0;
    }
    if (cl.command == "flags-markdown") {
      say(stdout, policy_flags_markdown());
      return 0;
    }
    if (cl.command == "version") {
      say(stdout, "belljar " BELLJAR_VERSION "\n");
      return 0;
    }
    if (cl.command == "kernel") return run_kernel(cl);
    if (cl.command == "check") return run_check(cl);
    if (cl.command == "launch") return run_launch(cl);
    if (cl.command == "install") {
      auto dir = install_kernelspec(cl);
      say(stdout, "installed kernelspec " + cl.name + " in " + dir.string() + "\n");
      return 0;
    }
    if (cl.command == "mcp") return run_mcp(cl);
    if (cl.command == "run") return run_once(cl);
    say(stderr, "belljar " + cl.command + ": unknown command\n");
    return 2;
  } catch (const UsageError& e) {
    say(stderr, std::string("belljar: ") + e.what() + "\n");
    return 2;
  } catch (const SandboxError& e) {
    say(stderr, std::string("belljar: refusing to start: ") + e.what() + "\n");
    return 1;
  } catch (const std::exception& e) {
    say(stderr, std::string("belljar: ") + e.what() + "\n");
    return 1;
  }
}
