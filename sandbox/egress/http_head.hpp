#pragma once
// HTTP/1.x message heads as the egress proxy sees them: the request a sandboxed client sends
// to its proxy (CONNECT host:port, or an absolute-form http:// URL) and the response that comes
// back from upstream. Parsing is strict (what a smuggling attempt relies on is refused: bare
// CR, obsolete line folding, spaces before the colon, userinfo in the URL, two Host headers,
// two Content-Lengths, Content-Length with Transfer-Encoding, a coding other than chunked) and
// bounded by the caller, which only hands over a head it has seen end within its size cap.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace belljar {

// A head that can't be used; the message says why, for a 400 body.
struct HttpHeadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct HttpHeader {
  std::string name;
  std::string value;
};

struct RequestHead {
  std::string method;   // "CONNECT", "GET", ...
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<HttpHeader> headers;
  bool tunnel = false;  // CONNECT: bytes flow through untouched once connected
  std::string host;     // as the target names it, IPv6 in brackets
  uint16_t port = 0;
  std::string path;  // plain HTTP: origin-form for upstream ("/index.html?q=1")
  // The body's framing, from the one Content-Length or Transfer-Encoding: chunked it may carry
  // (duplicates, both at once, or another coding are refused by the parser).
  std::optional<uint64_t> content_length;
  bool chunked = false;
};

struct ResponseHead {
  std::string version;
  int status = 0;
  std::string reason;
  std::vector<HttpHeader> headers;
};

// Length of the head (through the blank line) if data holds a whole one; nullopt otherwise.
std::optional<size_t> find_head_end(std::string_view data);

// Throws HttpHeadError. `head` is exactly what find_head_end measured.
RequestHead parse_request_head(std::string_view head);
ResponseHead parse_response_head(std::string_view head);
// A request as an origin server gets it, inside a TLS tunnel the proxy terminates
// (brokered_http.hpp): the target is a path ("/v1/chat?x=1") or "*" for OPTIONS; `host` and
// `port` stay empty (the tunnel decided them). The same header rules as above.
RequestHead parse_origin_request_head(std::string_view head);

// What the proxy sends upstream for a plain HTTP request: origin-form target, hop-by-hop
// headers (Connection and what it names, Keep-Alive, Proxy-*, TE, Upgrade) dropped, the Host
// header written from the request line (the allowlisted host; the client's own is dropped), and
// "Connection: close": one request per upstream connection.
std::string upstream_request_head(const RequestHead& request);
// What the client gets back: the same head, hop-by-hop headers dropped and "Connection: close",
// so the client never reuses a connection the proxy is about to close.
std::string client_response_head(const ResponseHead& response);

// A complete response from the proxy itself: status, a text body, "Connection: close", and any
// extra headers (e.g. X-Belljar-Denied).
std::string proxy_response(int status, std::string_view reason, std::string_view body,
                           const std::vector<HttpHeader>& extra = {});

}  // namespace belljar
