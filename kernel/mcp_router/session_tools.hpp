#pragma once
// The tools the session router answers itself (session_router.hpp), as MCP describes them, and
// the `session` argument it adds to every tool a session answers.
//   open_session    a new session, its own sandbox: its handle
//   close_session   ends one open_session made
//   list_sessions   the live sessions, the caller's (one client holds the server)
#include <nlohmann/json.hpp>
#include <string_view>

#include "kernel/mcp/mcp_revision.hpp"

namespace belljar {

inline constexpr std::string_view kSessionArgument = "session";

bool is_session_tool(std::string_view name);
// The tools/list answer of a session, for `revision`: `session` added to each tool's
// arguments, and the session tools after them.
nlohmann::json with_session_tools(nlohmann::json tools, const McpRevision& revision);
// A CallToolResult of a session tool: `text` for every client, `structured` where the
// revision carries structuredContent.
nlohmann::json session_tool_result(const std::string& text, nlohmann::json structured,
                                   const McpRevision& revision);

}  // namespace belljar
