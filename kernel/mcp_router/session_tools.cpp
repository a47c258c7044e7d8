#include "kernel/mcp_router/session_tools.hpp"

#include "kernel/mcp/mcp_tools.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {

json handle_property(const char* what) {
  return {{"type", "string"}, {"description", what}};
}

json described_session_tools() {
  json session_schema = object_schema(
      {{"session", handle_property("the handle open_session returned")}}, {"session"});
  return json::array(
      {{{"name", "open_session"},
        {"title", "Open a session"},
        {"description",
         "Start another persistent Python session, in a sandbox of its own with the server's "
         "limits and the same workspace. Returns its handle: pass it as `session` to any tool "
         "(without one, a tool uses this connection's own session). Sessions left idle end "
         "after the server's --idle-timeout."},
        {"inputSchema", object_schema(json::object(), json::array())},
        {"outputSchema",
         object_schema({{"session", handle_property("the new session's handle")}}, {"session"})},
        {"annotations",
         {{"title", "Open a session"},
          {"readOnlyHint", false},
          {"destructiveHint", false},
          {"idempotentHint", false},
          {"openWorldHint", false}}}},
       {{"name", "close_session"},
        {"title", "Close a session"},
        {"description",
         "End a session open_session started: its Python state is gone (a running call is "
         "stopped); workspace files are kept."},
        {"inputSchema", session_schema},
        {"outputSchema",
         object_schema({{"closed", handle_property("the handle closed")}}, {"closed"})},
        {"annotations",
         {{"title", "Close a session"},
          {"readOnlyHint", false},
          {"destructiveHint", true},
          {"idempotentHint", true},
          {"openWorldHint", false}}}},
       {{"name", "list_sessions"},
        {"title", "List sessions"},
        {"description",
         "The live sessions: each one's handle, whether it is this connection's own, how long "
         "it has been idle and how many calls it is running."},
        {"inputSchema", object_schema(json::object(), json::array())},
        {"outputSchema",
         object_schema({{"sessions", {{"type", "array"}, {"items", {{"type", "object"}}}}}},
                       {"sessions"})},
        {"annotations",
         {{"title", "List sessions"},
          {"readOnlyHint", true},
          {"destructiveHint", false},
          {"idempotentHint", true},
          {"openWorldHint", false}}}}});
}

}  // namespace

bool is_session_tool(std::string_view name) {
  return name == "open_session" || name == "close_session" || name == "list_sessions";
}

json with_session_tools(json tools, const McpRevision& revision) {
  if (!tools.is_array()) return tools;
  for (auto& tool : tools) {
    if (!tool.is_object()) continue;
    auto& schema = tool["inputSchema"];
    if (!schema.is_object()) continue;
    if (!schema["properties"].is_object()) schema["properties"] = json::object();
    schema["properties"][std::string(kSessionArgument)] = handle_property(
        "the session to run in: a handle open_session returned (omit it for this connection's "
        "own session)");
  }
  for (json tool : described_session_tools()) {
    // As mcp_tool_list shapes its own: fields of later revisions stay out of older clients' way.
    if (!revision.structured) {
      tool.erase("outputSchema");
      tool.erase("title");
    }
    if (!revision.annotations) tool.erase("annotations");
    if (revision.icons) tool["icons"] = belljar_icons();
    tools.push_back(std::move(tool));
  }
  return tools;
}

json session_tool_result(const std::string& text, json structured, const McpRevision& revision) {
  json result = {{"content", json::array({{{"type", "text"}, {"text", text}}})},
                 {"isError", false}};
  if (revision.structured) result["structuredContent"] = std::move(structured);
  return result;
}

}  // namespace belljar
