#pragma once
// `belljar mcp`: the session router (session_router.hpp) and its sessions' processes
// (session_processes.hpp), in one poll loop with the clients (stdio_client.hpp, or the HTTP
// server in kernel/mcp_http) and the signals. SIGTERM, SIGINT or SIGHUP stop every session at
// once. The router's own records (a session opened, closed, idled out) go to the audit log
// its policy names.
#include <optional>
#include <string>
#include <vector>

#include "kernel/mcp_router/client_side.hpp"
#include "kernel/mcp_router/session_folders.hpp"
#include "kernel/mcp_router/session_router.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

struct RouterOptions {
  std::vector<std::string> session_args;  // what follows `belljar` for each session
  std::optional<SessionFolders> folders;  // --session-folders: each session's own workspace
  RouterLimits limits;
  Policy policy;
};

// The exit status: 0, or the default session's when it could not start (refused flags, say).
// `start_fields`: what the mcp_router_start record adds (the HTTP server's address).
int serve_mcp_sessions(const RouterOptions& options, ClientSide& clients,
                       const nlohmann::json& start_fields = nlohmann::json::object());

}  // namespace belljar
