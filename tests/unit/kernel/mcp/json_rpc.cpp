// JSON-RPC 2.0 lines as `belljar mcp` reads them: every malformed line becomes the error the
// spec names, never an exception.
#include "kernel/mcp/json_rpc.hpp"

#include <catch2/catch.hpp>

using namespace belljar;
using nlohmann::json;
using Kind = JsonRpcMessage::Kind;

TEST_CASE("a request keeps its id, method and params", "[json_rpc]") {
  auto m =
      parse_json_rpc(R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}})");
  REQUIRE(m.kind == Kind::request);
  CHECK(m.id == 7);
  CHECK(m.method == "tools/call");
  CHECK(m.params == json{{"name", "x"}});
  auto s = parse_json_rpc(R"({"jsonrpc":"2.0","id":"a-1","method":"ping"})");
  REQUIRE(s.kind == Kind::request);
  CHECK(s.id == "a-1");
  CHECK(s.params == json::object());
}

TEST_CASE("a message without id is a notification", "[json_rpc]") {
  auto m = parse_json_rpc(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}})");
  CHECK(m.kind == Kind::notification);
  CHECK(m.method == "notifications/cancelled");
}

TEST_CASE("a response from the client is recognised", "[json_rpc]") {
  CHECK(parse_json_rpc(R"({"jsonrpc":"2.0","id":1,"result":{}})").kind == Kind::response);
  CHECK(parse_json_rpc(R"({"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}})").kind ==
        Kind::response);
}

TEST_CASE("malformed lines get the JSON-RPC error they deserve", "[json_rpc]") {
  struct Case {
    const char* line;
    JsonRpcError error;
    json id;
  };
  const Case cases[] = {
      {"{", JsonRpcError::parse_error, nullptr},
      {"not json", JsonRpcError::parse_error, nullptr},
      {"", JsonRpcError::parse_error, nullptr},
      {"[]", JsonRpcError::invalid_request, nullptr},
      {R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", JsonRpcError::invalid_request, nullptr},
      {"42", JsonRpcError::invalid_request, nullptr},
      {R"({"id":1,"method":"ping"})", JsonRpcError::invalid_request, 1},
      {R"({"jsonrpc":"2.0","id":1})", JsonRpcError::invalid_request, 1},
      {R"({"jsonrpc":"2.0","id":1,"method":null})", JsonRpcError::invalid_request, 1},
      {R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})", JsonRpcError::invalid_request, nullptr},
      {R"({"jsonrpc":"2.0","id":null,"method":"ping"})", JsonRpcError::invalid_request, nullptr},
      {R"({"jsonrpc":"2.0","id":2,"method":"ping","params":"x"})", JsonRpcError::invalid_request,
       2},
      {R"({"jsonrpc":"2.0","id":3,"method":"ping","params":[1]})", JsonRpcError::invalid_params, 3},
  };
  for (const auto& c : cases) {
    INFO(c.line);
    auto m = parse_json_rpc(c.line);
    REQUIRE(m.kind == Kind::invalid);
    CHECK(m.error == c.error);
    CHECK(m.id == c.id);
    CHECK(!m.problem.empty());
  }
}

TEST_CASE("deeply nested JSON is refused before it is parsed", "[json_rpc]") {
  std::string line = std::string(100000, '[') + std::string(100000, ']');
  auto m = parse_json_rpc(line);
  CHECK(m.kind == Kind::invalid);
  CHECK(m.error == JsonRpcError::parse_error);
}

TEST_CASE("replies carry the version, the id and the code", "[json_rpc]") {
  CHECK(json_rpc_result(5, {{"a", 1}}) ==
        json{{"jsonrpc", "2.0"}, {"id", 5}, {"result", {{"a", 1}}}});
  json error = json_rpc_error(nullptr, JsonRpcError::method_not_found, "nope");
  CHECK(error["id"].is_null());
  CHECK(error["error"]["code"] == -32601);
  CHECK(error["error"]["message"] == "nope");
  CHECK(json_rpc_notification("notifications/progress", json::object())["method"] ==
        "notifications/progress");
}
