#include "kernel/mcp_http/http_rules.hpp"

#include <arpa/inet.h>
#include <sodium.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "kernel/mcp/mcp_revision.hpp"
#include "kernel/protocol/base64.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "sandbox/os/ascii.hpp"

namespace belljar {

using json = nlohmann::json;

bool HttpAddress::loopback() const {
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return host == "localhost";
}

std::string HttpAddress::url_host() const {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

std::optional<HttpAddress> parse_http_address(std::string_view text, std::string* why) {
  HttpAddress address;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      *why = "an IPv6 address is [ADDRESS]:PORT";
      return std::nullopt;
    }
    address.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      *why = "HOST:PORT, such as 127.0.0.1:8765 (port 0 picks a free one)";
      return std::nullopt;
    }
    address.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
    if (address.host.find(':') != std::string::npos) {
      *why = "an IPv6 address is [ADDRESS]:PORT";
      return std::nullopt;
    }
  }
  unsigned value = 0;
  auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || error != std::errc() || end != port.data() + port.size() || value > 65535) {
    *why = "the port is a number from 0 to 65535";
    return std::nullopt;
  }
  address.port = static_cast<unsigned short>(value);
  in_addr v4{};
  in6_addr v6{};
  if (address.host != "localhost" && ::inet_pton(AF_INET, address.host.c_str(), &v4) != 1 &&
      ::inet_pton(AF_INET6, address.host.c_str(), &v6) != 1) {
    // A name would be resolved, and could name anything: the address is given as numbers.
    *why = "the host is an IP address (or localhost), not a name to resolve";
    return std::nullopt;
  }
  if (address.host == "localhost") address.host = "127.0.0.1";
  return address;
}

std::string mcp_token_from(const char* configured, std::string* why) {
  if (configured) {
    std::string_view token(configured);
    bool printable = std::all_of(token.begin(), token.end(),
                                 [](unsigned char c) { return c > 0x20 && c < 0x7f; });
    if (token.size() < 16 || !printable) {
      *why = "BELLJAR_MCP_TOKEN must be at least 16 printable characters, without spaces";
      return {};
    }
    return std::string(token);
  }
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof bytes);
  char text[sodium_base64_ENCODED_LEN(sizeof bytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
  sodium_bin2base64(text, sizeof text, bytes, sizeof bytes,
                    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  return text;
}

bool bearer_matches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() < scheme.size() || ascii_lower(authorization.substr(0, 7)) != scheme)
    return false;
  std::string_view given = authorization.substr(scheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  while (!given.empty() && given.back() == ' ') given.remove_suffix(1);
  // Hashed first, so the comparison's time depends on neither length nor content.
  unsigned char want[crypto_generichash_BYTES], got[crypto_generichash_BYTES];
  crypto_generichash(want, sizeof want, reinterpret_cast<const unsigned char*>(token.data()),
                     token.size(), nullptr, 0);
  crypto_generichash(got, sizeof got, reinterpret_cast<const unsigned char*>(given.data()),
                     given.size(), nullptr, 0);
  return sodium_memcmp(want, got, sizeof want) == 0;
}

HttpHostRule::HttpHostRule(const HttpAddress& bound, const std::vector<std::string>& proxied) {
  any_host_ = bound.host == "0.0.0.0" || bound.host == "::";
  for (const auto& name : proxied) proxied_.push_back(ascii_lower(name));
  std::string port = ":" + std::to_string(bound.port);
  if (bound.loopback()) {
    for (const char* name : {"localhost", "127.0.0.1", "[::1]"}) hosts_.push_back(name + port);
  }
  hosts_.push_back(ascii_lower(bound.url_host()) + port);
}

bool HttpHostRule::host_allowed(std::string_view host) const {
  if (any_host_) return !host.empty();
  std::string named = ascii_lower(host);
  return std::find(hosts_.begin(), hosts_.end(), named) != hosts_.end() ||
         std::find(proxied_.begin(), proxied_.end(), named) != proxied_.end();
}

bool HttpHostRule::origin_allowed(std::optional<std::string_view> origin,
                                  std::string_view host) const {
  if (!origin) return true;
  std::string given = ascii_lower(*origin);
  for (const auto& name : proxied_)
    if (given == "https://" + name || given == "http://" + name) return true;
  constexpr std::string_view http = "http://";
  if (given.rfind(http, 0) != 0) return false;
  std::string_view named = std::string_view(given).substr(http.size());
  if (any_host_) return !host.empty() && named == ascii_lower(host);
  return host_allowed(named);
}

std::optional<std::string> parse_http_host(std::string_view text, std::string* why) {
  bool plain = !text.empty() && text.size() <= 253 &&
               std::all_of(text.begin(), text.end(), [](unsigned char c) {
                 return std::isalnum(c) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
               });
  if (!plain || text.front() == '.' || text.front() == '-' || text.front() == ':') {
    *why = "a name as a Host header carries it, such as mcp.example.org or mcp.example.org:8443";
    return std::nullopt;
  }
  return ascii_lower(text);
}

PostedMessage classify_posted(std::string_view body) {
  PostedMessage posted;
  std::string why;
  std::optional<json> parsed = parse_bounded_json(body, &why);  // depth and size bounded
  if (!parsed) {
    posted.problem = "parse error: " + why;
    return posted;
  }
  posted.body = std::move(*parsed);
  if (!posted.body.is_object()) {
    posted.problem = posted.body.is_array()
                         ? "invalid request: one JSON-RPC message a POST (batches are gone "
                           "since MCP 2025-06-18)"
                         : "invalid request: a JSON-RPC message is an object";
    posted.body = nullptr;
    return posted;
  }
  auto method = posted.body.find("method");
  bool has_id = posted.body.contains("id");
  if (method != posted.body.end() && method->is_string()) {
    posted.method = method->get<std::string>();
    posted.kind = has_id ? PostedMessage::Kind::request : PostedMessage::Kind::notification;
  } else if (has_id && (posted.body.contains("result") || posted.body.contains("error"))) {
    posted.kind = PostedMessage::Kind::response;
  } else {
    posted.problem = "invalid request: neither a request, a notification nor a response";
  }
  return posted;
}

std::optional<std::string> decode_mcp_header_value(std::string_view value) {
  constexpr std::string_view open = "=?base64?", close = "?=";
  if (value.size() < open.size() + close.size() || value.substr(0, open.size()) != open ||
      value.substr(value.size() - close.size()) != close)
    return std::string(value);
  std::string_view payload = value.substr(open.size(), value.size() - open.size() - close.size());
  std::optional<std::string> decoded = base64_decode(payload);
  if (!decoded || base64_encode(*decoded) != payload) return std::nullopt;
  return decoded;
}

std::optional<std::string> modern_header_mismatch(
    const json& body, const std::string& revision,
    const std::function<std::optional<std::string>(std::string_view)>& header) {
  std::optional<std::string> version = header("mcp-protocol-version");
  if (!version || *version != revision)
    return "the MCP-Protocol-Version header does not match the request's protocol version";
  std::string method = body.value("method", "");
  if (header("mcp-method") != method)
    return "the Mcp-Method header does not match the request's method";
  if (method == "tools/call" || method == "prompts/get") {
    const json& params = body.value("params", json::object());
    if (params.is_object() && params.value("name", json()).is_string()) {
      std::optional<std::string> name = header("mcp-name");
      std::optional<std::string> decoded = name ? decode_mcp_header_value(*name) : std::nullopt;
      if (!decoded || *decoded != params["name"].get<std::string>())
        return "the Mcp-Name header does not match the request's name";
    }
  }
  return std::nullopt;
}

int status_for_error(int code) {
  switch (code) {
    case -32700:  // parse error
    case -32600:  // invalid request
    case -32602:  // invalid params
    case kHeaderMismatch:
    case -32021:  // a required client capability missing
    case -32022:  // an unsupported protocol version
      return 400;
    case -32601:  // method not found
      return 404;
    default:
      return 200;
  }
}

}  // namespace belljar
