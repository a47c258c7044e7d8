#pragma once
// JSON-RPC 2.0 as MCP carries it on stdio: one message per line, no batches (MCP 2025-06-18
// dropped them). Parsing never throws: a malformed line becomes the error the spec asks for.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace belljar {

enum class JsonRpcError : int {
  parse_error = -32700,
  invalid_request = -32600,
  method_not_found = -32601,
  invalid_params = -32602,
  internal_error = -32603,
  unsupported_protocol_version = -32022,  // MCP 2026-07-28: data names the versions spoken
};

struct JsonRpcMessage {
  enum class Kind { request, notification, response, invalid };
  Kind kind = Kind::invalid;
  nlohmann::json id;  // string or integer; null when unknown
  std::string method;
  nlohmann::json params = nlohmann::json::object();  // an object ({} when absent)
  // invalid: what went wrong, answered with `id` (null when the line had no usable id)
  JsonRpcError error = JsonRpcError::invalid_request;
  std::string problem;
};

JsonRpcMessage parse_json_rpc(std::string_view line);

nlohmann::json json_rpc_result(const nlohmann::json& id, nlohmann::json result);
nlohmann::json json_rpc_error(const nlohmann::json& id, JsonRpcError code,
                              const std::string& message, nlohmann::json data = nullptr);
nlohmann::json json_rpc_notification(const std::string& method, nlohmann::json params);

}  // namespace belljar
