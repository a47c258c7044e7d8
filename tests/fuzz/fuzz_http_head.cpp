// libFuzzer target: the egress proxy's HTTP head parser on arbitrary bytes from an (untrusted)
// sandboxed client, and on response heads from an upstream server.
//
// Input: the bytes as they arrive. Whatever find_head_end measures is parsed as a request and
// as a response. A parse either throws HttpHeadError (never anything else) or yields a head the
// proxy can act on: a host and a port, at most one framing. What the proxy then writes (the
// upstream request, the client's response head) must be exactly one head without a bare CR or
// LF, and must parse again to the same host, port, path, framing and status: a request that
// reads one way to the allowlist and another way upstream is request smuggling.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sandbox/egress/http_head.hpp"

using namespace belljar;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// The proxy wrote a head it would refuse itself: say which, and why, before the crash report.
[[noreturn]] void refused_own_head(const char* what, const std::string& head,
                                   const HttpHeadError& e) {
  std::fprintf(stderr, "fuzz_http_head: the %s the proxy wrote is refused (%s):\n%s\n", what,
               e.what(), head.c_str());
  std::abort();
}

// One head, ending at its blank line, with CR and LF only as CRLF pairs.
void check_single_head(const std::string& head) {
  auto end = find_head_end(head);
  check(end && *end == head.size());
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\r') check(i + 1 < head.size() && head[i + 1] == '\n');
    if (head[i] == '\n') check(i > 0 && head[i - 1] == '\r');
  }
}

void request(std::string_view head) {
  RequestHead parsed;
  try {
    parsed = parse_request_head(head);
  } catch (const HttpHeadError& e) {
    check(*e.what() != '\0');
    return;
  }
  check(!parsed.host.empty() && parsed.port != 0);
  check(!(parsed.content_length && parsed.chunked));
  check(parsed.tunnel == (parsed.method == "CONNECT"));
  if (parsed.tunnel) return;
  check(!parsed.path.empty() && parsed.path.front() == '/');

  std::string upstream = upstream_request_head(parsed);
  check_single_head(upstream);
  // The upstream head, read back in the absolute form the proxy accepts, says the same thing.
  std::string absolute = parsed.method + " http://" + parsed.host + ":" +
                         std::to_string(parsed.port) + parsed.path + " " + parsed.version +
                         upstream.substr(upstream.find("\r\n"));
  RequestHead again;
  try {
    again = parse_request_head(absolute);
  } catch (const HttpHeadError& e) {
    refused_own_head("upstream request", absolute, e);
  }
  check(again.host == parsed.host && again.port == parsed.port && again.path == parsed.path);
  check(again.content_length == parsed.content_length && again.chunked == parsed.chunked);
}

void response(std::string_view head) {
  ResponseHead parsed;
  try {
    parsed = parse_response_head(head);
  } catch (const HttpHeadError& e) {
    check(*e.what() != '\0');
    return;
  }
  check(parsed.status >= 0 && parsed.status <= 999);
  std::string to_client = client_response_head(parsed);
  check_single_head(to_client);
  ResponseHead again;
  try {
    again = parse_response_head(to_client);
  } catch (const HttpHeadError& e) {
    refused_own_head("client response", to_client, e);
  }
  check(again.status == parsed.status && again.version == parsed.version);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto end = find_head_end(bytes);
  if (!end) return 0;
  check(*end <= size && bytes.substr(*end - 4, 4) == "\r\n\r\n");
  std::string_view head = bytes.substr(0, *end);
  request(head);
  response(head);
  return 0;
}
