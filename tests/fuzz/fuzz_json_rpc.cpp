// libFuzzer target: the MCP server's JSON-RPC reader on arbitrary lines from its client.
//
// Input: one line as McpFrontend hands it over (the newline already cut). parse_json_rpc must
// never throw, and must classify every line: an invalid one carries a reason and an id the
// error reply may echo (a string, an integer or null), a request or notification a method and
// an object of params. The reply the server would send for it must serialise to one line
// (dump_json escapes control characters; invalid UTF-8 from the client must not throw).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kernel/mcp/json_rpc.hpp"
#include "kernel/protocol/bounded_json.hpp"

using namespace belljar;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void check_one_line(const nlohmann::json& reply) {
  std::string text = dump_json(reply);
  check(!text.empty() && text.find('\n') == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  JsonRpcMessage message = parse_json_rpc(line);
  check(message.id.is_null() || message.id.is_string() || message.id.is_number_integer());
  check(message.params.is_object());
  switch (message.kind) {
    case JsonRpcMessage::Kind::invalid:
      check(!message.problem.empty());
      check_one_line(json_rpc_error(message.id, message.error, message.problem));
      break;
    case JsonRpcMessage::Kind::request:
      check_one_line(json_rpc_result(message.id, {{"method", message.method}}));
      break;
    case JsonRpcMessage::Kind::notification:
      check(message.id.is_null());
      check_one_line(json_rpc_notification(message.method, message.params));
      break;
    case JsonRpcMessage::Kind::response:
      check(!message.id.is_null());
      break;
  }
  return 0;
}
