// The ClientHello scanner (sandbox/egress/tls_client_hello.hpp) as a table of byte strings the
// sandbox could send, and the request-head rules that keep a plain request to the host the
// allowlist judged (sandbox/egress/http_head.hpp).
#include "sandbox/egress/tls_client_hello.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "sandbox/egress/http_head.hpp"

using namespace belljar;
using Status = ClientHelloScan::Status;

namespace {

std::string u16(size_t n) {
  return {static_cast<char>((n >> 8) & 0xff), static_cast<char>(n & 0xff)};
}
std::string u24(size_t n) {
  return {static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 8) & 0xff),
          static_cast<char>(n & 0xff)};
}

std::string extension(uint16_t type, const std::string& data) {
  return u16(type) + u16(data.size()) + data;
}

std::string server_name(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& name : names) list += std::string(1, '\0') + u16(name.size()) + name;
  return extension(0, u16(list.size()) + list);
}

// A ClientHello handshake message (header included) with these extensions; none at all when
// `extensions` is nullptr.
std::string hello(const std::string* extensions, size_t padding = 0) {
  std::string body = "\x03\x03" + std::string(32, 'r');  // legacy_version, random
  body += std::string(1, 32) + std::string(32, 's');     // session id
  body += u16(4) + std::string("\x13\x01\x13\x02", 4);   // two cipher suites
  body += std::string("\x01\x00", 2);                    // compression: null
  if (extensions) {
    std::string all = *extensions + (padding ? extension(21, std::string(padding, '\0')) : "");
    body += u16(all.size()) + all;
  }
  return std::string(1, 1) + u24(body.size()) + body;
}

// The handshake bytes in TLS records of at most `fragment` bytes each.
std::string records(const std::string& handshake, size_t fragment = 16384) {
  std::string out;
  for (size_t at = 0; at < handshake.size(); at += fragment) {
    std::string piece = handshake.substr(at, fragment);
    out += std::string("\x16\x03\x01", 3) + u16(piece.size()) + piece;
  }
  return out;
}

}  // namespace

TEST_CASE("the server name of a ClientHello is found, however it is split", "[egress][tls]") {
  std::string exts = extension(10, u16(2) + "\x00\x1d") + server_name({"api.example.com"});
  std::string message = hello(&exts);
  struct Row {
    const char* what;
    std::string bytes;
  };
  const Row rows[] = {
      {"one record", records(message)},
      {"a record per 7 bytes", records(message, 7)},
      {"the handshake header split across records", records(message, 2)},
      {"followed by other bytes", records(message) + "trailing application data"},
  };
  for (const auto& row : rows) {
    INFO(row.what);
    ClientHelloScan scan = scan_client_hello(row.bytes);
    REQUIRE(scan.status == Status::complete);
    REQUIRE(scan.server_name);
    CHECK(*scan.server_name == "api.example.com");
  }
}

TEST_CASE("every prefix of a ClientHello is incomplete, never a verdict", "[egress][tls]") {
  std::string exts = server_name({"a.example"});
  std::string bytes = records(hello(&exts), 50);
  for (size_t n = 0; n < bytes.size(); ++n) {
    INFO(n);
    CHECK(scan_client_hello(bytes.substr(0, n)).status == Status::incomplete);
  }
  CHECK(scan_client_hello(bytes).status == Status::complete);
}

TEST_CASE("a ClientHello without a server name is complete, with no name", "[egress][tls]") {
  std::string others = extension(10, u16(2) + "\x00\x1d");
  std::string empty;
  const std::string* cases[] = {&others, &empty, nullptr};
  for (const std::string* exts : cases) {
    ClientHelloScan scan = scan_client_hello(records(hello(exts)));
    CHECK(scan.status == Status::complete);
    CHECK_FALSE(scan.server_name);
  }
}

TEST_CASE("what is not a single-named ClientHello within bounds is malformed", "[egress][tls]") {
  std::string two_names = server_name({"allowed.example", "fronted.example"});
  std::string two_extensions = server_name({"allowed.example"}) + server_name({"fronted.example"});
  std::string empty_name = server_name({""});
  std::string good = server_name({"a.example"});
  std::string message = hello(&good);
  std::string bad_extension_length = message;
  bad_extension_length[message.size() - good.size() + 3] = '\x7f';  // the extension's own length
  // A ClientHello whose header says it ends 30 bytes in, inside its random.
  std::string truncated = std::string(1, 1) + u24(30) + hello(nullptr).substr(4, 30);
  std::string server_hello = message;
  server_hello[0] = 2;
  struct Row {
    const char* what;
    std::string bytes;
  };
  const Row rows[] = {
      {"two host names", records(hello(&two_names))},
      {"two server_name extensions", records(hello(&two_extensions))},
      {"an empty host name", records(hello(&empty_name))},
      {"an extension longer than its block", records(bad_extension_length)},
      {"not a handshake message", records(server_hello)},
      {"plain HTTP", "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n"},
      {"an alert record", std::string("\x15\x03\x01\x00\x02\x02\x31", 7)},
      {"an SSLv2-style hello", std::string("\x80\x2e\x01\x03\x01", 5)},
      {"a zero-length record", std::string("\x16\x03\x01\x00\x00", 5)},
      {"a record over 2^14", std::string("\x16\x03\x01\x40\x01", 5)},
      {"oversize: padded past 16 KiB", records(hello(&good, 20000))},
      {"oversize: a header claiming 1 MiB", std::string("\x16\x03\x01\x00\x04\x01\x10\x00\x00", 9)},
      {"truncated: a body shorter than its own fields", records(truncated)},
  };
  for (const auto& row : rows) {
    INFO(row.what);
    ClientHelloScan scan = scan_client_hello(row.bytes);
    CHECK(scan.status == Status::malformed);
    CHECK_FALSE(scan.error.empty());
  }
}

TEST_CASE("a plain request may name its host once, and frame its body once", "[egress]") {
  auto one = parse_request_head(
      "POST http://a.example/ HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\n\r\n");
  CHECK(one.content_length == 5u);
  CHECK_FALSE(one.chunked);
  const char* bad[] = {
      "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
      "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nhost: a.example\r\n\r\n",
      "POST http://a.example/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
      "POST http://a.example/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
      "POST http://a.example/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
      "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
      "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
      "chunked\r\n\r\n",
      "POST http://a.example/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
  };
  for (const char* head : bad) {
    INFO(head);
    CHECK_THROWS_AS(parse_request_head(head), HttpHeadError);
  }
}

TEST_CASE("upstream gets the request line's host, never the client's Host", "[egress]") {
  auto request = parse_request_head(
      "GET http://a.example:8080/ HTTP/1.1\r\nHost: forged.example\r\nAccept: */*\r\n\r\n");
  std::string head = upstream_request_head(request);
  CHECK(head.find("Host: a.example:8080\r\n") != std::string::npos);
  CHECK(head.find("Host:") == head.rfind("Host:"));
  CHECK(head.find("forged") == std::string::npos);
}
