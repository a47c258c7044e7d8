#pragma once
// `belljar mcp` on stdio: the session router (session_router.hpp) and its sessions' processes
// (session_processes.hpp), in one poll loop with stdin, stdout and the signals. The client
// closing stdin closes every session's input (each finishes what it was asked, as the
// single-session server always did); SIGTERM, SIGINT or SIGHUP stop them at once. The router's
// own records (a session opened, closed, idled out) go to the audit log its policy names.
#include <string>
#include <vector>

#include "kernel/mcp_router/session_router.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

struct RouterOptions {
  std::vector<std::string> session_args;  // what follows `belljar` for each session
  RouterLimits limits;
  Policy policy;
};

// The exit status: 0, or the default session's when it could not start (refused flags, say).
int serve_mcp_sessions(const RouterOptions& options);

}  // namespace belljar
