// RunRecord: one execution's outputs in the shape MCP's run_python and `belljar run --json`
// report; and the tool results built from it.
#include "kernel/session/run_record.hpp"

#include <catch2/catch.hpp>

#include "kernel/mcp/mcp_tools.hpp"

using namespace belljar;
using nlohmann::json;

namespace {
json stream(const char* name, const char* text) {
  return {{"name", name}, {"text", text}};
}
const char* kPng = "iVBORw0KGgo=";  // the 8-byte PNG signature
}  // namespace

TEST_CASE("consecutive stream chunks merge, and streams stay in order", "[run_record]") {
  RunRecord record;
  record.add("stream", stream("stdout", "a"));
  record.add("stream", stream("stdout", "b\n"));
  record.add("stream", stream("stderr", "warn\n"));
  record.add("stream", stream("stdout", "c\n"));
  record.add("status", {{"execution_state", "idle"}});
  record.finish({{"status", "ok"}, {"execution_count", 3}}, {{"belljar", {{"wall_ms", 1.5}}}});
  json s = record.structured();
  CHECK(s["status"] == "ok");
  CHECK(s["execution_count"] == 3);
  CHECK(s["error"].is_null());
  CHECK(s["facts"]["wall_ms"] == 1.5);
  CHECK(s["outputs"] == json::array({{{"type", "stream"}, {"name", "stdout"}, {"text", "ab\n"}},
                                     {{"type", "stream"}, {"name", "stderr"}, {"text", "warn\n"}},
                                     {{"type", "stream"}, {"name", "stdout"}, {"text", "c\n"}}}));
  CHECK(record.stream_tail(4) == "n\nc\n");
}

TEST_CASE("binary images stay out of structured data but are sized", "[run_record]") {
  RunRecord record;
  record.add("display_data", {{"data", {{"image/png", kPng}, {"text/plain", "<Figure>"}}},
                              {"transient", json::object()}});
  record.note_file("image/png", "/ws/belljar-output-1.png");
  record.finish({{"status", "ok"}, {"execution_count", 1}}, json::object());
  json display = record.structured()["outputs"][0];
  CHECK(display["data"] == json{{"text/plain", "<Figure>"}});
  CHECK(display["images"] ==
        json::array(
            {{{"mime_type", "image/png"}, {"bytes", 8}, {"file", "/ws/belljar-output-1.png"}}}));
  json result = run_python_result(record);
  CHECK(result["content"] ==
        json::array({{{"type", "image"}, {"data", kPng}, {"mimeType", "image/png"}}}));
  CHECK(result["isError"] == false);
}

TEST_CASE("clear_output and update_display_data act on what was recorded", "[run_record]") {
  RunRecord record;
  record.add("display_data",
             {{"data", {{"text/plain", "1"}}}, {"transient", {{"display_id", "d"}}}});
  record.add("update_display_data",
             {{"data", {{"text/plain", "2"}}}, {"transient", {{"display_id", "d"}}}});
  CHECK(record.outputs()[0]["data"]["text/plain"] == "2");
  record.add("clear_output", {{"wait", true}});
  CHECK(record.outputs().size() == 1);  // waits for the next output
  record.add("stream", stream("stdout", "after"));
  REQUIRE(record.outputs().size() == 1);
  CHECK(record.outputs()[0]["text"] == "after");
  record.add("clear_output", {{"wait", false}});
  CHECK(record.outputs().empty());
}

TEST_CASE("an error is plain text and makes the tool result an error", "[run_record]") {
  RunRecord record;
  record.add("error",
             {{"ename", "ValueError"},
              {"evalue", "bad"},
              {"traceback",
               {"\x1b[0;31mValueError\x1b[0m: bad", "\x1b]8;;file://x\x07link\x1b]8;;\x07"}}});
  record.finish({{"status", "error"}, {"execution_count", 2}, {"ename", "ValueError"}},
                json::object());
  json s = record.structured();
  CHECK(s["status"] == "error");
  CHECK(s["error"]["traceback"] == "ValueError: bad\nlink");
  json result = run_python_result(record);
  CHECK(result["isError"] == true);
  CHECK(result["content"][0]["text"] == "ValueError: bad\nlink");
}

TEST_CASE("a result is shown as Out[n]", "[run_record]") {
  RunRecord record;
  record.add("execute_result", {{"execution_count", 4}, {"data", {{"text/plain", "42"}}}});
  record.add("stream", stream("stderr", "w\n"));
  record.finish({{"status", "ok"}, {"execution_count", 4}}, json::object());
  json content = run_python_result(record)["content"];
  CHECK(content[0]["text"] == "Out[4]: 42");
  CHECK(content[1]["text"] == "[stderr]\nw\n");
}

TEST_CASE("tool arguments are checked against their schema", "[mcp_tools]") {
  CHECK_FALSE(check_tool_arguments(McpTool::run_python, {{"code", "1"}}));
  CHECK_FALSE(check_tool_arguments(McpTool::run_python, {{"code", "1"}, {"timeout_seconds", 2.5}}));
  CHECK(check_tool_arguments(McpTool::run_python, json::object()));
  CHECK(check_tool_arguments(McpTool::run_python, {{"code", 1}}));
  CHECK(check_tool_arguments(McpTool::run_python, {{"code", "1"}, {"timeout_seconds", 0}}));
  CHECK(check_tool_arguments(McpTool::run_python, {{"code", "1"}, {"extra", true}}));
  CHECK(check_tool_arguments(McpTool::read_file, {{"path", ""}}));
  CHECK(check_tool_arguments(McpTool::read_file, {{"path", "a"}, {"max_bytes", 0}}));
  CHECK(check_tool_arguments(McpTool::write_file,
                             {{"path", "a"}, {"content", "x"}, {"encoding", "latin-1"}}));
  CHECK_FALSE(check_tool_arguments(McpTool::list_files, json::object()));
  CHECK(check_tool_arguments(McpTool::run_python, json::array()));
}

TEST_CASE("a tool is named once: parsed from its name and spelled back", "[mcp_tools]") {
  for (McpTool tool : {McpTool::run_python, McpTool::reset_session, McpTool::list_files,
                       McpTool::read_file, McpTool::write_file, McpTool::checkpoint,
                       McpTool::rollback, McpTool::list_checkpoints, McpTool::drop_checkpoint})
    CHECK(mcp_tool(tool_name(tool)) == tool);
  CHECK(tool_name(McpTool::read_file) == "read_file");
  CHECK_FALSE(mcp_tool("run_pythonx"));
  CHECK_FALSE(mcp_tool(""));
  // what tools/list offers is exactly what a call may name
  json listed = mcp_tool_list(Policy{}, *mcp_revision("2025-11-25"));
  REQUIRE(listed.size() == 9);
  for (const auto& tool : listed) CHECK(mcp_tool(tool["name"].get<std::string>()));
}

TEST_CASE("protocol versions: the client's when known, else the newest", "[mcp_tools]") {
  CHECK(negotiate_mcp_revision("2024-11-05").version == "2024-11-05");
  CHECK(negotiate_mcp_revision("2025-03-26").version == "2025-03-26");
  CHECK(negotiate_mcp_revision("2025-06-18").version == "2025-06-18");
  CHECK(negotiate_mcp_revision("2025-11-25").version == "2025-11-25");
  CHECK(negotiate_mcp_revision("2099-01-01").version == "2025-11-25");
  CHECK(negotiate_mcp_revision(json(20250618)).version == "2025-11-25");
  // 2026-07-28 has no handshake: initialize never lands on it.
  CHECK(negotiate_mcp_revision("2026-07-28").version == "2025-11-25");
}
