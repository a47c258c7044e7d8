#include "sandbox/policy/environment_reads.hpp"

#include <array>

namespace belljar {

namespace {
constexpr std::array<EnvironmentRead, 28> kReads = {{
    {"*", "kernel/session/reactor.cpp",
     "the values of the names --secret binds (read once at start, put into the proxy's "
     "requests) and of --pass-env/--set-env names, which output masks"},
    {"*", "kernel/output/redactor.cpp", "which values output masks (--pass-env names' values)"},
    {"*", "sandbox/jail_client/worker_process.cpp",
     "handed to make_jail_spec, which copies only allowlisted names and --pass-env into the "
     "sandbox (environment.hpp); under --isolation none, the worker's environment (the banner "
     "flags that mode)"},
    {"JPY_PARENT_PID", "kernel/session/kernel.hpp",
     "which process's exit shuts the kernel down (the launching client)"},
    {"TMPDIR", "kernel/protocol/transport.cpp",
     "where the private 0700 directory of the doors' sockets is made (an absolute path under 60 "
     "characters, else /tmp); the sockets accept this process only"},
    {"*", "kernel/observability/observability.cpp",
     "handed to open_audit_destination, which reads XDG_STATE_HOME and HOME only (where the "
     "default audit log goes)"},
    {"*", "kernel/mcp_router/router_loop.cpp",
     "handed to open_audit_destination for the MCP router's own records (XDG_STATE_HOME and "
     "HOME only, as above)"},
    {"*", "kernel/mcp_router/session_processes.cpp",
     "passed whole to each session's own `belljar mcp`, which reads it as this table says (the "
     "environment `belljar mcp` was started with; the sandbox gets none of it)"},
    {"XDG_STATE_HOME", "kernel/observability/audit_destination.cpp",
     "where the default audit log goes; refused where the sandbox can write"},
    {"HOME", "kernel/observability/audit_destination.cpp",
     "where the default audit log goes when XDG_STATE_HOME is unset; refused where the sandbox "
     "can write"},
    {"JUPYTER_DATA_DIR", "kernel/command_line/kernelspec.cpp",
     "where `belljar install` writes the kernelspec"},
    {"XDG_DATA_HOME", "kernel/command_line/kernelspec.cpp",
     "where `belljar install` writes the kernelspec"},
    {"HOME", "kernel/command_line/kernelspec.cpp", "where `belljar install` writes the kernelspec"},
    {"HOME", "sandbox/policy/policy.cpp",
     "whether the workspace is the user's home, which adds /bin to the protected names (a login "
     "shell's PATH holds ~/bin); it can only add protection"},
    {"PYENV_VERSION", "sandbox/policy/interpreter.cpp",
     "which interpreter a pyenv shim given to --python resolves to, at install time (baked into "
     "the kernelspec's argv)"},
    {"PATH", "sandbox/policy/interpreter.cpp",
     "where python3 is found when --python is not given, at install time (baked into the "
     "kernelspec's argv)"},
    {"BELLJAR_POLICY_FLAGS", "kernel/command_line/main.cpp",
     "`belljar launch` only: the policy flags of a pod's kernelspec (install --kubernetes writes "
     "them into its env; the command line's own win)",
     true},
    {"BELLJAR_MCP_TOKEN", "kernel/command_line/main.cpp",
     "`belljar mcp --http` only: the bearer token every HTTP request must carry (else one is "
     "generated and printed); removed from the environment before any session starts, so no "
     "session's process and no sandbox holds it"},
    {"KERNEL_ID", "kernel/launch/gateway_launch.cpp",
     "`belljar launch` only: the kernel's id the gateway gave (--kernel-id wins)"},
    {"PORT_RANGE", "kernel/launch/gateway_launch.cpp",
     "`belljar launch` only: the ports it binds (--port-range wins)"},
    {"EG_PORT_RANGE", "kernel/launch/gateway_launch.cpp", "`belljar launch` only: as PORT_RANGE"},
    {"RESPONSE_ADDRESS", "kernel/launch/gateway_launch.cpp",
     "`belljar launch` only: where the sealed connection info goes (--response-address wins)"},
    {"EG_RESPONSE_ADDRESS", "kernel/launch/gateway_launch.cpp",
     "`belljar launch` only: as RESPONSE_ADDRESS"},
    {"PUBLIC_KEY", "kernel/launch/gateway_launch.cpp",
     "`belljar launch` only: the key the connection info is sealed with (--public-key wins)"},
    {"EG_PUBLIC_KEY", "kernel/launch/gateway_launch.cpp", "`belljar launch` only: as PUBLIC_KEY"},
    {"*", "kernel/output/redactor.hpp", "(declares the redactor's read above)"},
    {"*", "kernel/launch/gateway_launch.cpp",
     "flag_or_env: looks up the names of its lists only (the rows above)"},
    {"*", "kernel/command_line/main.cpp",
     "hands getenv to resolve_gateway_launch and describe_audit_destination (the reads above)"},
}};
}  // namespace

std::span<const EnvironmentRead> environment_reads() {
  return kReads;
}

}  // namespace belljar
