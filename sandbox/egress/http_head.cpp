#include "sandbox/egress/http_head.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "sandbox/os/host_port.hpp"

namespace belljar {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_token_char(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_token_char);
}

// Visible ASCII, obs-text and the spaces between them; never CR, LF, NUL or other controls.
bool is_field_value(std::string_view text) {
  for (unsigned char c : text)
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  return true;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Splits a head into its lines; every line must end in CRLF (a bare CR or LF is refused).
std::vector<std::string_view> head_lines(std::string_view head) {
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n")
    throw HttpHeadError("the head does not end with a blank line");
  std::vector<std::string_view> lines;
  head.remove_suffix(2);  // the blank line's CRLF
  while (!head.empty()) {
    auto crlf = head.find("\r\n");
    std::string_view line = head.substr(0, crlf);
    if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos)
      throw HttpHeadError("a bare CR or LF in the head");
    lines.push_back(line);
    head.remove_prefix(crlf + 2);
  }
  if (lines.empty()) throw HttpHeadError("an empty head");
  return lines;
}

std::vector<HttpHeader> parse_headers(const std::vector<std::string_view>& lines) {
  std::vector<HttpHeader> headers;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (!line.empty() && (line[0] == ' ' || line[0] == '\t'))
      throw HttpHeadError("obsolete line folding in a header");
    auto colon = line.find(':');
    if (colon == std::string_view::npos) throw HttpHeadError("a header line without a colon");
    std::string_view name = line.substr(0, colon);
    if (!is_token(name)) throw HttpHeadError("a malformed header name");
    std::string_view value = trim(line.substr(colon + 1));
    if (!is_field_value(value)) throw HttpHeadError("a control character in a header value");
    headers.push_back({std::string(name), std::string(value)});
  }
  return headers;
}

uint16_t parse_port(std::string_view text) {
  if (text.empty() || text.size() > 5 || !std::all_of(text.begin(), text.end(), ::isdigit))
    throw HttpHeadError("a malformed port");
  long port = std::stol(std::string(text));
  if (port < 1 || port > 65535) throw HttpHeadError("port out of range");
  return static_cast<uint16_t>(port);
}

// host[:port] or [v6][:port]; the host keeps its brackets.
void parse_authority(std::string_view authority, bool port_required, RequestHead& head) {
  if (authority.empty()) throw HttpHeadError("no host in the request target");
  if (authority.find('@') != std::string_view::npos)
    throw HttpHeadError("credentials in the request target");
  std::string_view host = authority, port;
  if (authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) throw HttpHeadError("an unclosed [ in the host");
    host = authority.substr(0, close + 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') throw HttpHeadError("junk after the IPv6 address");
      port = rest.substr(1);
      if (port.empty()) throw HttpHeadError("an empty port");
    }
  } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) throw HttpHeadError("an empty port");
  }
  if (host.empty() || host == "[]") throw HttpHeadError("no host in the request target");
  if (host.front() != '[' && host.find(':') != std::string_view::npos)
    throw HttpHeadError("an IPv6 address must be in brackets");
  if (port.empty() && port_required) throw HttpHeadError("CONNECT needs host:port");
  head.host = std::string(host);
  head.port = port.empty() ? 80 : parse_port(port);
}

std::set<std::string> connection_listed(const std::vector<HttpHeader>& headers) {
  std::set<std::string> names;
  for (const auto& h : headers) {
    if (lower(h.name) != "connection") continue;
    std::string_view rest = h.value;
    while (!rest.empty()) {
      auto comma = rest.find(',');
      std::string token = lower(trim(rest.substr(0, comma)));
      if (!token.empty()) names.insert(token);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return names;
}

bool hop_by_hop(const std::string& lowered, const std::set<std::string>& listed) {
  static const std::set<std::string> always = {
      "connection",         "keep-alive", "proxy-connection", "proxy-authorization",
      "proxy-authenticate", "te",         "upgrade"};
  return always.count(lowered) || listed.count(lowered);
}

}  // namespace

std::optional<size_t> find_head_end(std::string_view data) {
  auto end = data.find("\r\n\r\n");
  if (end == std::string_view::npos) return std::nullopt;
  return end + 4;
}

namespace {

// The request line and headers, checked; `target` is the request target as written.
RequestHead parse_request_line_and_headers(std::string_view text, std::string_view& target) {
  auto lines = head_lines(text);
  std::string_view line = lines[0];
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    throw HttpHeadError("a malformed request line");
  RequestHead head;
  head.method = std::string(line.substr(0, sp1));
  target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  head.version = std::string(line.substr(sp2 + 1));
  if (!is_token(head.method)) throw HttpHeadError("a malformed method");
  if (head.version != "HTTP/1.1" && head.version != "HTTP/1.0")
    throw HttpHeadError("not HTTP/1.0 or HTTP/1.1");
  if (target.empty() || !is_field_value(target) || target.find('\t') != std::string_view::npos)
    throw HttpHeadError("a malformed request target");
  head.headers = parse_headers(lines);

  // What request smuggling relies on: two parties reading a different end of the body, or a
  // different host, from the same head. One of each, or the request is refused.
  int lengths = 0, codings = 0, hosts = 0;
  for (const auto& h : head.headers) {
    std::string name = lower(h.name);
    if (name == "content-length") {
      ++lengths;
      if (h.value.empty() || h.value.size() > 18 ||
          !std::all_of(h.value.begin(), h.value.end(), ::isdigit))
        throw HttpHeadError("a malformed Content-Length");
      head.content_length = std::stoull(h.value);
    } else if (name == "transfer-encoding") {
      ++codings;
      if (lower(h.value) != "chunked")
        throw HttpHeadError("a Transfer-Encoding other than chunked");
      head.chunked = true;
    } else if (name == "host") {
      ++hosts;
    }
  }
  if (lengths > 1) throw HttpHeadError("more than one Content-Length");
  if (codings > 1) throw HttpHeadError("more than one Transfer-Encoding");
  if (hosts > 1) throw HttpHeadError("more than one Host header");
  if (lengths && codings) throw HttpHeadError("both Content-Length and Transfer-Encoding");
  if (codings && head.version == "HTTP/1.0")
    throw HttpHeadError("Transfer-Encoding in an HTTP/1.0 request");
  return head;
}

}  // namespace

RequestHead parse_request_head(std::string_view text) {
  std::string_view target;
  RequestHead head = parse_request_line_and_headers(text, target);
  if (head.method == "CONNECT") {
    head.tunnel = true;
    parse_authority(target, true, head);
    return head;
  }
  std::string scheme = lower(target.substr(0, std::min<size_t>(target.size(), 8)));
  if (scheme.rfind("https://", 0) == 0)
    throw HttpHeadError(
        "an https:// URL must come through CONNECT (use the proxy for HTTPS as usual)");
  if (scheme.rfind("http://", 0) != 0)
    throw HttpHeadError(
        "this is an egress proxy: send CONNECT host:port or an absolute http:// URL");
  std::string_view rest = target.substr(7);
  auto authority_end = rest.find_first_of("/?#");
  parse_authority(rest.substr(0, authority_end), false, head);
  std::string_view path =
      authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (auto hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
  if (path.empty())
    head.path = "/";
  else if (path.front() == '?')
    head.path = "/" + std::string(path);
  else
    head.path = std::string(path);
  return head;
}

RequestHead parse_origin_request_head(std::string_view text) {
  std::string_view target;
  RequestHead head = parse_request_line_and_headers(text, target);
  if (head.method == "CONNECT") throw HttpHeadError("CONNECT inside a tunnel");
  if (target.front() != '/' && !(target == "*" && head.method == "OPTIONS"))
    throw HttpHeadError("the request target must be a path (origin-form) inside a tunnel");
  head.path = std::string(target);
  return head;
}

ResponseHead parse_response_head(std::string_view text) {
  auto lines = head_lines(text);
  std::string_view line = lines[0];
  auto sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || line.substr(0, 5) != "HTTP/")
    throw HttpHeadError("a malformed status line");
  ResponseHead head;
  head.version = std::string(line.substr(0, sp1));
  std::string_view rest = line.substr(sp1 + 1);
  std::string_view code = rest.substr(0, rest.find(' '));
  // RFC 9110: a status code is three digits, 100 to 599 ("099" would be relayed as "99").
  if (code.size() != 3 || !std::all_of(code.begin(), code.end(), ::isdigit) || code[0] < '1' ||
      code[0] > '5')
    throw HttpHeadError("a malformed status code");
  head.status = std::stoi(std::string(code));
  head.reason = code.size() < rest.size() ? std::string(rest.substr(4)) : "";
  if (!is_field_value(head.reason)) throw HttpHeadError("a control character in the reason phrase");
  head.headers = parse_headers(lines);
  return head;
}

std::string upstream_request_head(const RequestHead& request) {
  std::string out = request.method + " " + request.path + " " + request.version + "\r\n";
  // The Host the allowlist judged, whatever the client wrote: a shared front end routes by it.
  out += "Host: " + (request.port == 80 ? request.host : host_port(request.host, request.port)) +
         "\r\n";
  auto listed = connection_listed(request.headers);
  for (const auto& h : request.headers) {
    std::string name = lower(h.name);
    if (hop_by_hop(name, listed) || name == "host") continue;
    out += h.name + ": " + h.value + "\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out;
}

std::string client_response_head(const ResponseHead& response) {
  std::string out =
      response.version + " " + std::to_string(response.status) + " " + response.reason + "\r\n";
  auto listed = connection_listed(response.headers);
  for (const auto& h : response.headers) {
    if (hop_by_hop(lower(h.name), listed)) continue;
    out += h.name + ": " + h.value + "\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out;
}

std::string proxy_response(int status, std::string_view reason, std::string_view body,
                           const std::vector<HttpHeader>& extra) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
  out += "Content-Type: text/plain; charset=utf-8\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& h : extra) out += h.name + ": " + h.value + "\r\n";
  out += "Connection: close\r\n\r\n";
  out += body;
  return out;
}

}  // namespace belljar
