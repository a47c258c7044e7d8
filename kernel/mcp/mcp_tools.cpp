#include "kernel/mcp/mcp_tools.hpp"

#include <array>
#include <cmath>

#include "kernel/protocol/base64.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/json_field.hpp"
#include "kernel/session/checkpoints.hpp"
#include "sandbox/jail_client/workspace_files.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {

constexpr long long kMaxReadBytes = WorkspaceFiles::kMaxReadBytes;
constexpr long long kDefaultReadBytes = WorkspaceFiles::kDefaultReadBytes;

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

json text_block(std::string text) {
  return {{"type", "text"}, {"text", std::move(text)}};
}

std::string string_field(const json& object, const char* key) {
  return json_field(object, key, "");
}

// One argument of a tool: its JSON type and whether it must be given.
struct Argument {
  const char* name;
  const char* type;  // string, number, integer, boolean
  bool required;
};

// Each tool's name and arguments, in McpTool's order: the one place a tool is spelled.
struct ToolSpec {
  McpTool tool;
  std::string_view name;
  std::vector<Argument> arguments;
};

const std::array<ToolSpec, 9>& tool_specs() {
  static const std::array<ToolSpec, 9> table = {{
      {McpTool::run_python,
       "run_python",
       {{"code", "string", true}, {"timeout_seconds", "number", false}}},
      {McpTool::reset_session, "reset_session", {}},
      {McpTool::list_files,
       "list_files",
       {{"path", "string", false}, {"recursive", "boolean", false}}},
      {McpTool::read_file,
       "read_file",
       {{"path", "string", true}, {"offset", "integer", false}, {"max_bytes", "integer", false}}},
      {McpTool::write_file,
       "write_file",
       {{"path", "string", true},
        {"content", "string", true},
        {"encoding", "string", false},
        {"append", "boolean", false},
        {"create_dirs", "boolean", false}}},
      {McpTool::checkpoint, "checkpoint", {{"name", "string", false}}},
      {McpTool::rollback, "rollback", {{"checkpoint", "string", true}}},
      {McpTool::list_checkpoints, "list_checkpoints", {}},
      {McpTool::drop_checkpoint, "drop_checkpoint", {{"checkpoint", "string", true}}},
  }};
  return table;
}

const ToolSpec& spec_of(McpTool tool) {
  return tool_specs()[static_cast<size_t>(tool)];
}

bool has_type(const json& value, const std::string& type) {
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") return value.is_number_integer();
  return value.is_boolean();
}

bool looks_like_base64(const std::string& text) {
  for (char c : text)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && c != '=')
      return false;
  return text.size() % 4 == 0;
}

std::string image_mime_for(const std::string& path) {
  auto dot = path.rfind('.');
  if (dot == std::string::npos) return {};
  std::string ext = path.substr(dot + 1);
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == "png") return "image/png";
  if (ext == "jpg" || ext == "jpeg") return "image/jpeg";
  if (ext == "gif") return "image/gif";
  if (ext == "webp") return "image/webp";
  return {};
}

json run_python_output_schema() {
  return {
      {"type", "object"},
      {"properties",
       {{"status", {{"type", "string"}, {"enum", {"ok", "error", "aborted"}}}},
        {"execution_count", {{"type", {"integer", "null"}}}},
        {"outputs", {{"type", "array"}, {"items", {{"type", "object"}, {"required", {"type"}}}}}},
        {"error", {{"type", {"object", "null"}}}},
        {"facts", {{"type", "object"}}}}},
      {"required", {"status", "execution_count", "outputs", "error", "facts"}}};
}

}  // namespace

json object_schema(json properties, json required) {
  json schema = {
      {"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) schema["required"] = std::move(required);
  return schema;
}

// belljar's icon: a bell jar over a plus, as an SVG (2025-11-25's icons).
json belljar_icons() {
  static const std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 64 64\">"
      "<path d=\"M14 54V30a18 18 0 0 1 36 0v24\" fill=\"#dbeafe\" stroke=\"#1e3a8a\" "
      "stroke-width=\"4\"/><circle cx=\"32\" cy=\"9\" r=\"4\" fill=\"#1e3a8a\"/>"
      "<rect x=\"8\" y=\"52\" width=\"48\" height=\"6\" rx=\"2\" fill=\"#1e3a8a\"/>"
      "<path d=\"M26 40h12M32 34v12\" stroke=\"#2563eb\" stroke-width=\"4\"/></svg>";
  return json::array({{{"src", "data:image/svg+xml;base64," + base64_encode(svg)},
                       {"mimeType", "image/svg+xml"},
                       {"sizes", {"any"}}}});
}

std::optional<McpTool> mcp_tool(std::string_view name) {
  for (const auto& spec : tool_specs())
    if (spec.name == name) return spec.tool;
  return std::nullopt;
}

std::string_view tool_name(McpTool tool) {
  return spec_of(tool).name;
}

json mcp_server_instructions(const Policy& policy) {
  std::string text =
      "belljar runs Python in a persistent, sandboxed session, like a Jupyter notebook: "
      "variables, imports and functions stay between run_python calls until reset_session. "
      "The working directory is the workspace " +
      policy.workspace.string() +
      ", the only writable folder (list_files, read_file and write_file work there; secret "
      "files such as .env are masked). Limits: " +
      seconds_text(policy.timeout_seconds) + " wall-clock per call, " +
      format_size(policy.memory_bytes) + " of memory. ";
  text += policy.allow_net.empty() ? "There is no network access."
                                   : "Network access is limited to an allowlist.";
  if (policy.isolation == Isolation::none)
    text =
        "WARNING: this server runs with --isolation none: code runs with the user's own "
        "privileges, environment and network. " +
        text;
  return text;
}

namespace {

json tools_as_described(const Policy& policy);

}  // namespace

json mcp_server_info(const McpRevision& revision) {
  json info = {{"name", "belljar"}, {"version", BELLJAR_VERSION}};
  if (revision.structured) info["title"] = "belljar: Python in a sandbox";
  if (revision.icons) info["icons"] = belljar_icons();
  return info;
}

json mcp_tool_list(const Policy& policy, const McpRevision& revision) {
  json tools = tools_as_described(policy);
  for (auto& tool : tools) {
    // Fields of later revisions stay out of an older client's way.
    if (!revision.structured) {
      tool.erase("outputSchema");
      tool.erase("title");
    }
    if (!revision.annotations) tool.erase("annotations");
    if (revision.icons) tool["icons"] = belljar_icons();
    // A cell may run long: an agent may run it as a task, and poll (mcp_tasks.hpp).
    if (revision.tasks && tool["name"] == "run_python")
      tool["execution"] = {{"taskSupport", "optional"}};
  }
  return tools;
}

namespace {

json checkpoint_annotations(const char* title, bool read_only, bool destructive) {
  return {{"title", title},
          {"readOnlyHint", read_only},
          {"destructiveHint", destructive},
          {"idempotentHint", read_only},
          {"openWorldHint", false}};
}

json checkpoint_handle(const char* what) {
  return {{"type", "string"}, {"description", what}};
}

json checkpoint_tools() {
  json facts = {{"checkpoint", checkpoint_handle("the checkpoint's handle")},
                {"name", {{"type", "string"}}},
                {"execution_count", {{"type", "integer"}}}};
  json rolled = facts;
  rolled["workspace"] = {{"type", {"object", "null"}},
                         {"description",
                          "names made, removed and renamed in the workspace since the checkpoint "
                          "(null when it holds too many names to list)"}};
  return json::array(
      {{{"name", "checkpoint"},
        {"title", "Checkpoint the session"},
        {"description",
         "Keep the Python session as it is now (variables, modules, objects, the execution "
         "count), in milliseconds: a copy-on-write fork of the sandboxed process, charged to "
         "the session's memory as its pages diverge. Returns a handle for rollback. Workspace "
         "files are not copied. The oldest is dropped past the server's --checkpoints."},
        {"inputSchema",
         object_schema(
             {{"name",
               {{"type", "string"}, {"description", "a name of 1 to 64 letters, digits, _ - ."}}}},
             json::array())},
        {"outputSchema", object_schema(facts, {"checkpoint", "name", "execution_count"})},
        {"annotations", checkpoint_annotations("Checkpoint the session", false, false)}},
       {{"name", "rollback"},
        {"title", "Roll back to a checkpoint"},
        {"description",
         "Return the session to a checkpoint: its memory comes back exactly (threads the "
         "session started, subprocesses and sockets do not). Lists the names made, removed and "
         "renamed in the workspace since, which the rollback does not undo. The checkpoint is "
         "kept: roll back to it again later. Queued behind a running call."},
        {"inputSchema",
         object_schema(
             {{"checkpoint", checkpoint_handle("a handle checkpoint returned, or its name")}},
             {"checkpoint"})},
        {"outputSchema", object_schema(rolled, {"checkpoint", "name", "execution_count"})},
        {"annotations", checkpoint_annotations("Roll back to a checkpoint", false, true)}},
       {{"name", "list_checkpoints"},
        {"title", "List checkpoints"},
        {"description", "The session's checkpoints, oldest first."},
        {"inputSchema", object_schema(json::object(), json::array())},
        {"outputSchema",
         object_schema({{"checkpoints", {{"type", "array"}, {"items", {{"type", "object"}}}}}},
                       {"checkpoints"})},
        {"annotations", checkpoint_annotations("List checkpoints", true, false)}},
       {{"name", "drop_checkpoint"},
        {"title", "Drop a checkpoint"},
        {"description", "Let a checkpoint go, and the memory it holds."},
        {"inputSchema",
         object_schema(
             {{"checkpoint", checkpoint_handle("a handle checkpoint returned, or its name")}},
             {"checkpoint"})},
        {"outputSchema", object_schema({{"checkpoint", checkpoint_handle("the handle dropped")},
                                        {"name", {{"type", "string"}}}},
                                       {"checkpoint", "name"})},
        {"annotations", checkpoint_annotations("Drop a checkpoint", false, true)}}});
}

json tools_as_described(const Policy& policy) {
  std::string limits = seconds_text(policy.timeout_seconds) +
                       " wall-clock per call (timeout_seconds can only shorten it), " +
                       format_size(policy.memory_bytes) + " of memory for the session";
  json run_python = {
      {"name", "run_python"},
      {"title", "Run Python"},
      {"description",
       "Run Python code in a persistent sandboxed session (state is kept between calls, as in a "
       "Jupyter notebook). Returns printed output, the value of the last expression, errors with "
       "their traceback (isError is true), and images (matplotlib figures are shown "
       "automatically) as PNG image content; structuredContent has the status, the outputs and "
       "the run's facts (wall_ms, cpu_ms, limit_hit, output_truncated, egress_denied). The "
       "working directory is the workspace " +
           policy.workspace.string() + ". Limits: " + limits +
           "; no network unless allowlisted. IPython magics work when IPython is installed."},
      {"inputSchema",
       object_schema({{"code", {{"type", "string"}, {"description", "Python source to run"}}},
                      {"timeout_seconds",
                       {{"type", "number"},
                        {"exclusiveMinimum", 0},
                        {"description",
                         "wall-clock limit for this call, in seconds; capped to the "
                         "server's policy (" +
                             seconds_text(policy.timeout_seconds) + ")"}}}},
                     {"code"})},
      {"outputSchema", run_python_output_schema()},
      {"annotations",
       {{"title", "Run Python"},
        {"readOnlyHint", false},
        {"destructiveHint", true},
        {"idempotentHint", false},
        {"openWorldHint", !policy.allow_net.empty()}}}};
  json reset_session = {{"name", "reset_session"},
                        {"title", "Reset the Python session"},
                        {"description",
                         "Start a fresh Python session: every variable, import and definition is "
                         "gone; files in the workspace are kept."},
                        {"inputSchema", object_schema(json::object(), json::array())},
                        {"annotations",
                         {{"title", "Reset the Python session"},
                          {"readOnlyHint", false},
                          {"destructiveHint", true},
                          {"idempotentHint", true},
                          {"openWorldHint", false}}}};
  json list_files = {
      {"name", "list_files"},
      {"title", "List workspace files"},
      {"description", "List a folder of the workspace " + policy.workspace.string() +
                          " (paths are relative to it). Secret files such as .env are listed as "
                          "masked; symlinks are not followed."},
      {"inputSchema",
       object_schema(
           {{"path",
             {{"type", "string"},
              {"description", "folder inside the workspace (default: its root)"}}},
            {"recursive",
             {{"type", "boolean"}, {"description", "list subfolders too (up to 2000 entries)"}}}},
           json::array())},
      {"annotations",
       {{"title", "List workspace files"}, {"readOnlyHint", true}, {"openWorldHint", false}}}};
  json read_file = {
      {"name", "read_file"},
      {"title", "Read a workspace file"},
      {"description",
       "Read a file of the workspace " + policy.workspace.string() +
           ": text comes back as text, images as image content, other binary files as "
           "a base64 resource. Paths outside the workspace (.., absolute paths "
           "elsewhere, symlinks out) and masked secrets are refused."},
      {"inputSchema",
       object_schema(
           {{"path", {{"type", "string"}, {"description", "file path, relative to the workspace"}}},
            {"offset",
             {{"type", "integer"},
              {"minimum", 0},
              {"description", "first byte to read (default 0)"}}},
            {"max_bytes",
             {{"type", "integer"},
              {"minimum", 1},
              {"maximum", kMaxReadBytes},
              {"description", "most bytes to read (default 1 MiB)"}}}},
           {"path"})},
      {"annotations",
       {{"title", "Read a workspace file"}, {"readOnlyHint", true}, {"openWorldHint", false}}}};
  json write_file = {
      {"name", "write_file"},
      {"title", "Write a workspace file"},
      {"description", "Write (or append to) a file in the workspace " + policy.workspace.string() +
                          ", creating folders as needed. Paths outside the workspace and masked "
                          "secrets are refused."},
      {"inputSchema",
       object_schema(
           {{"path", {{"type", "string"}, {"description", "file path, relative to the workspace"}}},
            {"content",
             {{"type", "string"}, {"description", "the text, or base64 when encoding is base64"}}},
            {"encoding",
             {{"type", "string"}, {"enum", {"utf-8", "base64"}}, {"description", "default utf-8"}}},
            {"append",
             {{"type", "boolean"}, {"description", "append instead of replacing (default false)"}}},
            {"create_dirs",
             {{"type", "boolean"}, {"description", "create missing folders (default true)"}}}},
           {"path", "content"})},
      {"annotations",
       {{"title", "Write a workspace file"},
        {"readOnlyHint", false},
        {"destructiveHint", true},
        {"idempotentHint", true},
        {"openWorldHint", false}}}};
  json tools = json::array({run_python, reset_session, list_files, read_file, write_file});
  for (json& tool : checkpoint_tools()) tools.push_back(std::move(tool));
  return tools;
}

}  // namespace

std::optional<std::string> check_tool_arguments(McpTool tool, const json& arguments) {
  if (!arguments.is_object()) return "arguments must be an object";
  const ToolSpec& spec = spec_of(tool);
  const std::string name(spec.name);
  for (auto& [key, value] : arguments.items()) {
    bool known = false;
    for (auto& argument : spec.arguments) known = known || key == argument.name;
    if (!known) return name + ": unknown argument " + key;
  }
  for (auto& argument : spec.arguments) {
    auto value = arguments.find(argument.name);
    if (value == arguments.end()) {
      if (argument.required) return name + ": missing required argument " + argument.name;
      continue;
    }
    if (!has_type(*value, argument.type))
      return name + ": " + argument.name + " must be " +
             (std::string(argument.type) == "integer" ? "an " : "a ") + argument.type;
  }
  if (auto t = arguments.find("timeout_seconds");
      t != arguments.end() && !(t->get<double>() > 0 && std::isfinite(t->get<double>())))
    return name + ": timeout_seconds must be a positive number";
  if (auto o = arguments.find("offset"); o != arguments.end() && o->get<long long>() < 0)
    return name + ": offset must be >= 0";
  if (auto m = arguments.find("max_bytes");
      m != arguments.end() && (m->get<long long>() < 1 || m->get<long long>() > kMaxReadBytes))
    return name + ": max_bytes must be between 1 and " + std::to_string(kMaxReadBytes);
  if (auto e = arguments.find("encoding"); e != arguments.end() && *e != "utf-8" && *e != "base64")
    return name + ": encoding must be utf-8 or base64";
  // A name goes into a magic's cell: by shape only, so no text becomes code.
  if (auto n = arguments.find("name");
      n != arguments.end() && !Checkpoints::valid_name(n->get_ref<const std::string&>()))
    return name + ": name must be 1 to 64 letters, digits, '_', '-' or '.'";
  if (auto c = arguments.find("checkpoint");
      c != arguments.end() && !Checkpoints::valid_reference(c->get_ref<const std::string&>()))
    return name + ": checkpoint must be a handle checkpoint returned, or a checkpoint's name";
  if (auto p = arguments.find("path"); p != arguments.end() && tool != McpTool::list_files &&
                                       p->get_ref<const std::string&>().empty())
    return name + ": path must not be empty";
  return std::nullopt;
}

json tool_error_result(const std::string& text) {
  return {{"content", json::array({text_block(text)})}, {"isError", true}};
}

json run_python_result(const RunRecord& record) {
  json structured = record.structured();
  json content = json::array();
  std::string count = structured["execution_count"].is_number_integer()
                          ? std::to_string(structured["execution_count"].get<int>())
                          : " ";
  for (const auto& output : record.outputs()) {
    const std::string& type = output["type"].get_ref<const std::string&>();
    if (type == "stream") {
      std::string text = output["text"];
      content.push_back(text_block(output["name"] == "stderr" ? "[stderr]\n" + text : text));
    } else if (type == "error") {
      std::string traceback = output["traceback"];
      content.push_back(text_block(!traceback.empty() ? traceback
                                                      : output["ename"].get<std::string>() + ": " +
                                                            output["evalue"].get<std::string>()));
    } else {
      const json& data = output["data"];
      bool imaged = false;
      for (auto& [mime, value] : data.items())
        if (is_binary_image(mime) && value.is_string() &&
            looks_like_base64(value.get<std::string>())) {
          content.push_back({{"type", "image"}, {"data", value}, {"mimeType", mime}});
          imaged = true;
        }
      std::string text;
      for (const char* mime :
           {"text/plain", "text/markdown", "image/svg+xml", "text/html", "text/latex"})
        if (text.empty() && !imaged) text = string_field(data, mime);
      if (text.empty() && !imaged && !data.empty()) {
        text = "[display of";
        for (auto& [mime, value] : data.items()) text += " " + mime;
        text += "]";
      }
      if (text.empty()) continue;
      if (type == "result")
        text = "Out[" + count + "]:" + (text.find('\n') == std::string::npos ? " " : "\n") + text;
      content.push_back(text_block(text));
    }
  }
  if (content.empty())
    content.push_back(
        text_block(record.status() == "ok" ? "(no output)" : "(failed without output)"));
  return {{"content", std::move(content)},
          {"structuredContent", std::move(structured)},
          {"isError", record.status() != "ok"}};
}

bool is_checkpoint_tool(McpTool tool) {
  return tool == McpTool::checkpoint || tool == McpTool::rollback ||
         tool == McpTool::list_checkpoints || tool == McpTool::drop_checkpoint;
}

std::string checkpoint_cell(McpTool tool, const json& arguments) {
  switch (tool) {
    case McpTool::checkpoint:
      return "%checkpoint " + json_field(arguments, "name", "");
    case McpTool::rollback:
      return "%rollback " + json_field(arguments, "checkpoint", "");
    case McpTool::drop_checkpoint:
      return "%drop_checkpoint " + json_field(arguments, "checkpoint", "");
    default:
      return "%checkpoints";
  }
}

json checkpoint_result(McpTool tool, const RunRecord& record) {
  json structured = record.structured();
  if (record.status() != "ok") {
    json error = structured["error"];
    std::string why = error.is_object() ? string_field(error, "evalue") : "unknown";
    return tool_error_result(std::string(tool_name(tool)) + " failed: " + why);
  }
  json facts = structured["facts"].value("checkpoint", json::object());
  facts.erase("op");
  facts.erase("ok");
  facts.erase("made_at");
  std::string text;
  for (const auto& output : structured["outputs"]) {
    const json& data = output.value("data", json::object());
    if (output.value("type", "") == "stream") text += output.value("text", "");
    if (data.contains("text/plain") && data["text/plain"].is_string())
      text += data["text/plain"].get<std::string>() + "\n";
    // A rollback's workspace changes: the session's own account (the worker lists them).
    auto changes = data.find("application/vnd.belljar.checkpoint+json");
    if (tool == McpTool::rollback && changes != data.end() && changes->is_object())
      facts["workspace"] = changes->value("workspace", json());
  }
  if (tool == McpTool::rollback && !facts.contains("workspace")) facts["workspace"] = nullptr;
  if (text.empty()) text = "(no output)";
  return {{"content", json::array({text_block(text)})},
          {"structuredContent", std::move(facts)},
          {"isError", false}};
}

json reset_session_result(const RunRecord& record) {
  if (record.status() != "ok") {
    json error = record.structured()["error"];
    std::string why = error.is_object()
                          ? string_field(error, "ename") + ": " + string_field(error, "evalue")
                          : "unknown";
    return tool_error_result("the session could not be reset: " + why);
  }
  return {
      {"content", json::array({text_block("A fresh Python session is ready: variables, imports and "
                                          "definitions are gone; workspace files were kept.")})},
      {"structuredContent", {{"status", "ok"}}},
      {"isError", false}};
}

namespace {

// Text that is whole UTF-8 and holds no NUL (a binary file may be valid UTF-8 all the same);
// a read cut short may end inside a character, which is left out of the text.
std::optional<std::string> utf8_text(const std::string& bytes, bool truncated) {
  if (bytes.find('\0') != std::string::npos) return std::nullopt;
  size_t at = 0;
  while (at < bytes.size()) {
    auto c = static_cast<unsigned char>(bytes[at]);
    size_t length = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xE  ? 3
                    : (c >> 3) == 0x1E ? 4
                                       : 0;
    if (length == 0 || (length == 2 && c < 0xC2) || (length == 4 && c > 0xF4)) return std::nullopt;
    if (at + length > bytes.size()) {
      if (truncated) return bytes.substr(0, at);  // a character split by the read's end
      return std::nullopt;
    }
    for (size_t i = 1; i < length; ++i)
      if ((static_cast<unsigned char>(bytes[at + i]) >> 6) != 0x2) return std::nullopt;
    uint32_t point = length == 1 ? c : c & (0x7F >> length);
    for (size_t i = 1; i < length; ++i) point = (point << 6) | (bytes[at + i] & 0x3F);
    if ((length == 3 && point < 0x800) || (length == 4 && point < 0x10000) ||
        (point >= 0xD800 && point <= 0xDFFF) || point > 0x10FFFF)
      return std::nullopt;
    at += length;
  }
  return bytes;
}

json listing_result(const WorkspaceListing& listing) {
  std::string text;
  json entries = json::array();
  for (const auto& entry : listing.entries) {
    std::string kind(entry_kind_name(entry.kind));
    json described = {{"path", entry.path}, {"type", kind}, {"masked", entry.masked}};
    described["size"] = entry.size ? json(*entry.size) : json();
    if (entry.kind == WorkspaceEntry::Kind::symlink) described["target"] = entry.target;
    entries.push_back(std::move(described));
    if (entry.masked)
      text += entry.path + "  (masked secret)\n";
    else if (entry.kind == WorkspaceEntry::Kind::directory)
      text += entry.path + "/\n";
    else if (entry.kind == WorkspaceEntry::Kind::symlink)
      text += entry.path + " -> " + entry.target + "\n";
    else if (entry.kind == WorkspaceEntry::Kind::file)
      text += entry.path + "  (" + std::to_string(entry.size.value_or(0)) + " bytes)\n";
    else
      text += entry.path + "  (" + kind + ")\n";
  }
  size_t count = listing.entries.size();
  std::string header = std::to_string(count) + (count == 1 ? " entry" : " entries") + " in " +
                       (listing.path == "." ? "the workspace" : listing.path) +
                       (listing.truncated ? " (truncated)" : "") + "\n";
  return {
      {"content", json::array({text_block(header + text)})},
      {"structuredContent",
       {{"path", listing.path}, {"entries", std::move(entries)}, {"truncated", listing.truncated}}},
      {"isError", false}};
}

json read_result(const WorkspaceRead& read, const Policy& policy) {
  json structured = {{"path", read.path},
                     {"size", read.size},
                     {"offset", read.offset},
                     {"bytes", read.bytes.size()},
                     {"truncated", read.truncated}};
  json content = json::array();
  uint64_t shown = read.bytes.size();
  if (auto text = utf8_text(read.bytes, read.truncated)) {
    structured["encoding"] = "utf-8";
    shown = text->size();
    structured["bytes"] = shown;
    content.push_back(text_block(std::move(*text)));
  } else {
    structured["encoding"] = "base64";
    std::string body = base64_encode(read.bytes);
    std::string mime = image_mime_for(read.path);
    std::string absolute = (policy.workspace / read.path).lexically_normal().string();
    if (!mime.empty())
      content.push_back({{"type", "image"}, {"data", std::move(body)}, {"mimeType", mime}});
    else
      content.push_back({{"type", "resource"},
                         {"resource",
                          {{"uri", "file://" + absolute},
                           {"mimeType", "application/octet-stream"},
                           {"blob", std::move(body)}}}});
  }
  bool truncated = read.offset + shown < read.size;
  structured["truncated"] = truncated;
  if (truncated)
    content.push_back(text_block("[read " + std::to_string(shown) + " of " +
                                 std::to_string(read.size) + " bytes from offset " +
                                 std::to_string(read.offset) +
                                 "; call read_file again with offset " +
                                 std::to_string(read.offset + shown) + " for more]"));
  return {{"content", std::move(content)},
          {"structuredContent", std::move(structured)},
          {"isError", false}};
}

}  // namespace

json file_tool_result(McpTool tool, const json& arguments, const Policy& policy) {
  try {
    WorkspaceFiles files(policy);
    std::string path = json_field(arguments, "path", "");
    switch (tool) {
      case McpTool::list_files:
        return listing_result(
            files.list(path.empty() ? "." : path, json_field(arguments, "recursive", false)));
      case McpTool::read_file: {
        auto offset = static_cast<uint64_t>(json_field(arguments, "offset", 0ll));
        auto most = static_cast<uint64_t>(
            json_field(arguments, "max_bytes", static_cast<long long>(kDefaultReadBytes)));
        return read_result(files.read(path, offset, most), policy);
      }
      case McpTool::write_file:
        break;
      default:
        return tool_error_result(std::string(tool_name(tool)) + " is not a file tool");
    }
    std::string content = json_field(arguments, "content", "");
    std::string data;
    if (json_field(arguments, "encoding", "utf-8") == "base64") {
      auto decoded = base64_decode(content);
      if (!decoded) return tool_error_result("write_file: content is not valid base64");
      data = std::move(*decoded);
    } else {
      data = std::move(content);
    }
    WorkspaceWrite written = files.write(path, data, json_field(arguments, "append", false),
                                         json_field(arguments, "create_dirs", true));
    return {{"content", json::array({text_block("wrote " + std::to_string(written.bytes_written) +
                                                " bytes to " + written.path + " (now " +
                                                std::to_string(written.size) + " bytes)")})},
            {"structuredContent",
             {{"path", written.path},
              {"bytes_written", written.bytes_written},
              {"size", written.size}}},
            {"isError", false}};
  } catch (const WorkspaceRefusal& refusal) {
    return tool_error_result(refusal.what());
  } catch (const std::exception& e) {  // SandboxError: no --sandbox-user to write as
    return tool_error_result(std::string(tool_name(tool)) + " failed: " + e.what());
  }
}

}  // namespace belljar
