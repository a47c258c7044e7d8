#pragma once
// What the MCP Streamable HTTP server (http_server.hpp) lets through, decided from a request's
// headers and body before anything reaches the router. Everything an HTTP client sends is
// hostile until its token is checked, so the order is fixed: the path and method, then the
// bearer token (compared in constant time), then Host and Origin (DNS rebinding), then the
// body's size, type and shape. What passes:
//   POST   /mcp  one JSON-RPC message (application/json), at most kMaxMcpBody bytes
//   GET    /mcp  an event stream of an MCP session's own notifications (Mcp-Session-Id)
//   DELETE /mcp  the end of an MCP session (Mcp-Session-Id)
// Anything else is refused with a status and a sentence (and a JSON-RPC error where the client
// expects one).
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace belljar {

// As a stdio line may be (kernel/mcp/json_lines.hpp): a write_file of a large file.
inline constexpr size_t kMaxMcpBody = 64u << 20;
inline constexpr size_t kMaxMcpHeaders = 16u << 10;

// The listening address: HOST:PORT, [IPV6]:PORT; PORT 0 picks a free one.
struct HttpAddress {
  std::string host;  // without brackets
  unsigned short port = 0;
  bool loopback() const;
  std::string url_host() const;  // with brackets for IPv6
};
// Nullopt with `why` for what is not an address.
std::optional<HttpAddress> parse_http_address(std::string_view text, std::string* why);

// The token every request must carry: BELLJAR_MCP_TOKEN when set (at least 16 characters),
// else 32 random bytes, base64url.
std::string mcp_token_from(const char* configured, std::string* why);
// `Authorization: Bearer <token>`, in constant time for the token's bytes.
bool bearer_matches(std::string_view authorization, std::string_view token);

// Host and Origin a browser page may not forge past: the names of the address the server
// listens on (for a loopback address, every loopback spelling) with its port. Listening on
// every address (0.0.0.0, ::), any Host is the server's, and a page's Origin must be the Host
// it sent to (the bearer token is then the whole defence against a rebound name).
// `proxied`: the names a TLS proxy in front forwards as Host (--http-host), each allowed as
// given, and as the origin of a page served under it (https:// or http://).
class HttpHostRule {
 public:
  explicit HttpHostRule(const HttpAddress& bound, const std::vector<std::string>& proxied = {});
  bool host_allowed(std::string_view host) const;
  // No Origin (a program, not a page) passes; a page's must be the server's own.
  bool origin_allowed(std::optional<std::string_view> origin, std::string_view host) const;

 private:
  std::vector<std::string> hosts_;  // host:port, lower case
  std::vector<std::string> proxied_;
  bool any_host_ = false;
};

// --http-host NAME[:PORT]: a DNS name or an address, as a Host header carries it; nullopt with
// `why` for anything else (a scheme, a path, a space).
std::optional<std::string> parse_http_host(std::string_view text, std::string* why);

// One POST body, as JSON-RPC.
struct PostedMessage {
  enum class Kind { request, notification, response, invalid } kind = Kind::invalid;
  nlohmann::json body;  // parsed; null when invalid
  std::string method;
  std::string problem;  // invalid: why (a parse error)
};
PostedMessage classify_posted(std::string_view body);

// A 2026-07-28 request's routing headers against its body (the revision's "header
// mismatch", -32020): MCP-Protocol-Version equals the envelope's revision, Mcp-Method the
// method, Mcp-Name a tools/call's or prompts/get's name. Nullopt when they agree; `header`
// gives a header's value (nullopt when absent).
inline constexpr int kHeaderMismatch = -32020;
std::optional<std::string> modern_header_mismatch(
    const nlohmann::json& body, const std::string& revision,
    const std::function<std::optional<std::string>(std::string_view)>& header);
// The Mcp-Name rule's decoding: a value is verbatim, or "=?base64?...?=" (canonical) of UTF-8.
std::optional<std::string> decode_mcp_header_value(std::string_view value);

// The HTTP status a JSON answer to a 2026-07-28 request carries, by its error code (the
// revision's table; everything else 200). Older revisions answer 200 always.
int status_for_error(int code);

}  // namespace belljar
