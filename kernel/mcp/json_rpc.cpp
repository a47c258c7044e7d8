#include "kernel/mcp/json_rpc.hpp"

#include "kernel/protocol/bounded_json.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {
JsonRpcMessage invalid(json id, JsonRpcError error, std::string problem) {
  JsonRpcMessage message;
  message.id = std::move(id);
  message.error = error;
  message.problem = std::move(problem);
  return message;
}

bool usable_id(const json& id) {
  return id.is_string() || id.is_number_integer();
}
}  // namespace

JsonRpcMessage parse_json_rpc(std::string_view line) {
  std::string why;
  auto parsed = parse_bounded_json(line, &why);
  if (!parsed) return invalid(nullptr, JsonRpcError::parse_error, "parse error: " + why);
  json& value = *parsed;
  if (value.is_array())
    return invalid(nullptr, JsonRpcError::invalid_request,
                   "invalid request: batches are not supported");
  if (!value.is_object())
    return invalid(nullptr, JsonRpcError::invalid_request,
                   "invalid request: not a JSON-RPC object");

  auto id = value.find("id");
  bool has_id = id != value.end();
  json reply_id = has_id && usable_id(*id) ? *id : json(nullptr);
  auto version = value.find("jsonrpc");
  if (version == value.end() || *version != "2.0")
    return invalid(reply_id, JsonRpcError::invalid_request,
                   "invalid request: jsonrpc must be \"2.0\"");
  if (has_id && !usable_id(*id))
    return invalid(nullptr, JsonRpcError::invalid_request,
                   "invalid request: id must be a string or an integer");

  auto method = value.find("method");
  if (method == value.end()) {
    if (has_id && (value.contains("result") || value.contains("error"))) {
      JsonRpcMessage response;
      response.kind = JsonRpcMessage::Kind::response;
      response.id = reply_id;
      return response;
    }
    return invalid(reply_id, JsonRpcError::invalid_request, "invalid request: no method");
  }
  if (!method->is_string())
    return invalid(reply_id, JsonRpcError::invalid_request,
                   "invalid request: method must be a string");

  JsonRpcMessage message;
  message.kind = has_id ? JsonRpcMessage::Kind::request : JsonRpcMessage::Kind::notification;
  message.id = reply_id;
  message.method = method->get<std::string>();
  if (auto params = value.find("params"); params != value.end()) {
    if (params->is_array())
      return invalid(reply_id, JsonRpcError::invalid_params,
                     "invalid params: MCP takes named parameters (an object)");
    if (!params->is_object())
      return invalid(reply_id, JsonRpcError::invalid_request,
                     "invalid request: params must be an object");
    message.params = std::move(*params);
  }
  return message;
}

json json_rpc_result(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json json_rpc_error(const json& id, JsonRpcError code, const std::string& message, json data) {
  json error = {{"code", static_cast<int>(code)}, {"message", message}};
  if (!data.is_null()) error["data"] = std::move(data);
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

json json_rpc_notification(const std::string& method, json params) {
  return {{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
}

}  // namespace belljar
