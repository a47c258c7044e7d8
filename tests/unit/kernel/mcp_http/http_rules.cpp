// What the MCP HTTP server lets through at its door: the address it takes, the token, Host and
// Origin, the shape of a POST, a stateless request's routing headers, and the status of an
// error.
#include "kernel/mcp_http/http_rules.hpp"

#include <catch2/catch.hpp>
#include <map>

using namespace belljar;
using json = nlohmann::json;

TEST_CASE("the HTTP address is HOST:PORT with a numeric host, loopback told apart", "[mcp_http]") {
  std::string why;
  auto v4 = parse_http_address("127.0.0.1:8765", &why);
  REQUIRE(v4);
  CHECK(v4->port == 8765);
  CHECK(v4->loopback());
  auto v6 = parse_http_address("[::1]:0", &why);
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->url_host() == "[::1]");
  CHECK(v6->loopback());
  auto named = parse_http_address("localhost:1", &why);
  REQUIRE(named);
  CHECK(named->host == "127.0.0.1");
  auto wide = parse_http_address("0.0.0.0:80", &why);
  REQUIRE(wide);
  CHECK_FALSE(wide->loopback());
  for (const char* bad : {"", "8765", ":8765", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:x",
                          "example.org:80", "[::1]8765", "::1:80", "127.0.0.1:-1"}) {
    INFO(bad);
    CHECK_FALSE(parse_http_address(bad, &why));
  }
}

TEST_CASE("the token: the configured one when it is long enough, else a random one", "[mcp_http]") {
  std::string why;
  CHECK(mcp_token_from("0123456789abcdefXYZ", &why) == "0123456789abcdefXYZ");
  CHECK(mcp_token_from("short", &why).empty());
  CHECK(mcp_token_from("0123456789 abcdefXYZ", &why).empty());
  std::string a = mcp_token_from(nullptr, &why), b = mcp_token_from(nullptr, &why);
  CHECK(a.size() == 43);  // 32 bytes, base64url without padding
  CHECK(a != b);
}

TEST_CASE("a request passes with the bearer token alone", "[mcp_http]") {
  const std::string token = "s3cret-token-0123456789";
  CHECK(bearer_matches("Bearer " + token, token));
  CHECK(bearer_matches("bearer  " + token + " ", token));
  for (const std::string& bad :
       {std::string(), std::string("Bearer"), "Bearer " + token.substr(1), "Bearer " + token + "x",
        "Basic " + token, token, "Bearer " + token.substr(0, token.size() - 1) + "Y"}) {
    INFO(bad);
    CHECK_FALSE(bearer_matches(bad, token));
  }
}

TEST_CASE("Host and Origin: the server's own names only", "[mcp_http]") {
  std::string why;
  HttpHostRule loopback(*parse_http_address("127.0.0.1:8765", &why));
  for (const char* host : {"127.0.0.1:8765", "localhost:8765", "LOCALHOST:8765", "[::1]:8765"})
    CHECK(loopback.host_allowed(host));
  for (const char* host : {"", "127.0.0.1", "127.0.0.1:8766", "evil.example:8765",
                           "localhost.evil.example:8765", "127.0.0.2:8765"}) {
    INFO(host);
    CHECK_FALSE(loopback.host_allowed(host));
  }
  const char* host = "127.0.0.1:8765";
  CHECK(loopback.origin_allowed(std::nullopt, host));
  CHECK(loopback.origin_allowed("http://localhost:8765", host));
  for (const char* origin : {"null", "https://localhost:8765", "http://evil.example",
                             "http://localhost:8765.evil.example", "http://localhost", ""}) {
    INFO(origin);
    CHECK_FALSE(loopback.origin_allowed(std::string_view(origin), host));
  }
  HttpHostRule one(*parse_http_address("10.1.2.3:80", &why));
  CHECK(one.host_allowed("10.1.2.3:80"));
  CHECK_FALSE(one.host_allowed("localhost:80"));
  // Every address: any Host, and a page only of the Host it sent to.
  HttpHostRule every(*parse_http_address("0.0.0.0:80", &why));
  CHECK(every.host_allowed("sandbox.example.org:80"));
  CHECK_FALSE(every.host_allowed(""));
  CHECK(every.origin_allowed("http://sandbox.example.org:80", "sandbox.example.org:80"));
  CHECK_FALSE(every.origin_allowed("http://evil.example:80", "sandbox.example.org:80"));
  // Behind a TLS proxy: the names it forwards, as given, and pages served under them.
  HttpHostRule proxied(*parse_http_address("127.0.0.1:8765", &why), {"mcp.example.org"});
  CHECK(proxied.host_allowed("MCP.example.org"));
  CHECK(proxied.host_allowed("127.0.0.1:8765"));
  CHECK_FALSE(proxied.host_allowed("mcp.example.org:444"));
  CHECK(proxied.origin_allowed("https://mcp.example.org", "mcp.example.org"));
  CHECK_FALSE(proxied.origin_allowed("https://evil.example", "mcp.example.org"));
  CHECK(parse_http_host("Mcp.Example.org:8443", &why) == "mcp.example.org:8443");
  for (const char* bad :
       {"", "https://mcp.example.org", "mcp.example.org/mcp", "a b", ".x", "-x", ":80"}) {
    INFO(bad);
    CHECK_FALSE(parse_http_host(bad, &why));
  }
}

TEST_CASE("a POST body is one JSON-RPC message", "[mcp_http]") {
  using Kind = PostedMessage::Kind;
  CHECK(classify_posted(R"({"jsonrpc":"2.0","id":1,"method":"ping"})").kind == Kind::request);
  CHECK(classify_posted(R"({"jsonrpc":"2.0","method":"notifications/initialized"})").kind ==
        Kind::notification);
  CHECK(classify_posted(R"({"jsonrpc":"2.0","id":1,"result":{}})").kind == Kind::response);
  for (const char* bad : {"", "{", "[]", R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", "3",
                          R"({"jsonrpc":"2.0","id":1})", R"({"id":1,"method":7})"}) {
    INFO(bad);
    PostedMessage posted = classify_posted(bad);
    CHECK(posted.kind == Kind::invalid);
    CHECK_FALSE(posted.problem.empty());
  }
}

TEST_CASE("a stateless request's headers must say what its body says", "[mcp_http]") {
  json body = {{"jsonrpc", "2.0"},
               {"id", 1},
               {"method", "tools/call"},
               {"params", {{"name", "run_python"}, {"arguments", json::object()}}}};
  std::map<std::string, std::string> headers = {{"mcp-protocol-version", "2026-07-28"},
                                                {"mcp-method", "tools/call"},
                                                {"mcp-name", "run_python"}};
  auto header = [&](std::string_view name) -> std::optional<std::string> {
    auto it = headers.find(std::string(name));
    if (it == headers.end()) return std::nullopt;
    return it->second;
  };
  CHECK_FALSE(modern_header_mismatch(body, "2026-07-28", header));
  headers["mcp-name"] = "=?base64?cnVuX3B5dGhvbg==?=";  // run_python
  CHECK_FALSE(modern_header_mismatch(body, "2026-07-28", header));
  headers["mcp-name"] = "read_file";
  CHECK(modern_header_mismatch(body, "2026-07-28", header));
  headers["mcp-name"] = "run_python";
  headers["mcp-method"] = "tools/list";
  CHECK(modern_header_mismatch(body, "2026-07-28", header));
  headers["mcp-method"] = "tools/call";
  headers.erase("mcp-protocol-version");
  CHECK(modern_header_mismatch(body, "2026-07-28", header));
  CHECK(decode_mcp_header_value("plain") == "plain");
  CHECK_FALSE(decode_mcp_header_value("=?base64?!!!?="));
  CHECK_FALSE(decode_mcp_header_value("=?base64?cnVuX3B5dGhvbh==?="));  // not canonical
}

TEST_CASE("an error's HTTP status follows the stateless revision's table", "[mcp_http]") {
  for (int code : {-32700, -32600, -32602, -32020, -32021, -32022})
    CHECK(status_for_error(code) == 400);
  CHECK(status_for_error(-32601) == 404);
  for (int code : {-32603, -32000, 0, 1}) CHECK(status_for_error(code) == 200);
}
