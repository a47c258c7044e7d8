#pragma once
// The command line contract (README.md, "Command line"): belljar kernel | install | run | mcp |
// check | launch.
#include <optional>
#include <string>
#include <vector>

#include "kernel/launch/gateway_launch.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

struct CommandLine {
  std::string command;  // kernel, install, run, mcp, check, launch, help, version, flags-markdown
  std::string connection_file;  // kernel -f
  // install
  enum class Scope { default_, user, sys_prefix, prefix } scope = Scope::default_;
  std::string prefix;
  std::string name = "belljar";
  std::string display_name = "Python 3 (belljar)";
  // install --kubernetes IMAGE: a kernelspec for a gateway that runs each kernel in a pod
  enum class Gateway { enterprise_gateway, gateway_provisioners };
  std::optional<std::string> kubernetes_image;
  std::optional<Gateway> gateway;               // Enterprise Gateway unless told
  std::optional<std::string> launcher_scripts;  // the gateway's scripts/ to copy into the spec
  // run
  std::optional<std::string> run_file;  // "-" is stdin
  std::optional<std::string> run_code;  // -c
  bool json_output = false;
  // launch: what the gateway passed (its environment fills the gaps: resolve_gateway_launch)
  GatewayLaunchArgs launch;
  // mcp: the router's bounds (kernel/mcp_router). --one-session KERNEL_ID (hidden) is one of
  // its sessions' processes: today's single-session server, its kernel id minted by the router.
  std::optional<std::string> one_session;
  std::optional<std::string> http;      // mcp --http HOST:PORT, checked
  std::vector<std::string> http_hosts;  // mcp --http-host NAME: what a proxy forwards as Host
  bool session_folders = false;         // mcp: each session's own folder below the workspace
  size_t max_sessions = 8;
  double idle_timeout_seconds = 1800;  // 0: sessions never idle out
  PolicyBuilder policy;
};

// Throws UsageError (one line, exit 2) on anything it doesn't understand.
CommandLine parse_command_line(const std::vector<std::string>& args);
std::string usage_text();

}  // namespace belljar
