#pragma once
// The tools `belljar mcp` offers, as MCP describes them (name, JSON Schemas, hints), the
// checks of their arguments, and their results built from what the session answered.
//   run_python      code in the persistent session; outputs, images, the run's facts
//   reset_session   a fresh Python session; workspace files kept
//   checkpoint, rollback, list_checkpoints, drop_checkpoint   the session's checkpoints,
//                   through the magics' cells (%checkpoint, %rollback, ...)
//   list_files, read_file, write_file   the workspace, done by the supervisor itself
//                   (sandbox/jail_client/workspace_files.hpp): the kernel's word, never the
//                   session's, under the jail's masks and read-only rules
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kernel/mcp/mcp_revision.hpp"
#include "kernel/session/run_record.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

enum class McpTool {
  run_python,
  reset_session,
  list_files,
  read_file,
  write_file,
  checkpoint,
  rollback,
  list_checkpoints,
  drop_checkpoint
};
// The checkpoint tools run their magic's cell (kernel/session/checkpoints.hpp).
bool is_checkpoint_tool(McpTool tool);
// That cell's code, from arguments check_tool_arguments accepted.
std::string checkpoint_cell(McpTool tool, const nlohmann::json& arguments);
// The tool a tools/call names, parsed once; nullopt for a name this server does not offer.
std::optional<McpTool> mcp_tool(std::string_view name);
std::string_view tool_name(McpTool tool);

// The tools as `revision` describes them: fields of later revisions left out.
nlohmann::json mcp_tool_list(const Policy& policy, const McpRevision& revision);
// A tool's input or output schema: an object of these properties, no others.
nlohmann::json object_schema(nlohmann::json properties, nlohmann::json required);
// belljar's icon, as 2025-11-25's `icons` carry it (the server's and each tool's).
nlohmann::json belljar_icons();
// Who this server is, for initialize's serverInfo and server/discover's.
nlohmann::json mcp_server_info(const McpRevision& revision);
nlohmann::json mcp_server_instructions(const Policy& policy);

// nullopt when `arguments` suit the tool, else the problem (a JSON-RPC invalid params).
std::optional<std::string> check_tool_arguments(McpTool tool, const nlohmann::json& arguments);

// CallToolResult of run_python: text and image content, structuredContent, isError.
nlohmann::json run_python_result(const RunRecord& record);
// CallToolResult of a file tool, performed on the host's workspace with checked arguments.
nlohmann::json file_tool_result(McpTool tool, const nlohmann::json& arguments,
                                const Policy& policy);
nlohmann::json reset_session_result(const RunRecord& record);
// CallToolResult of a checkpoint tool: the supervisor's facts of the cell (its reply's
// metadata), and a rollback's workspace changes (the worker's display).
nlohmann::json checkpoint_result(McpTool tool, const RunRecord& record);
nlohmann::json tool_error_result(const std::string& text);

}  // namespace belljar
