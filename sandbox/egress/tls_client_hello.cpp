#include "sandbox/egress/tls_client_hello.hpp"

#include <cstdint>

namespace belljar {

namespace {

constexpr uint8_t kHandshakeRecord = 22;
constexpr uint8_t kClientHello = 1;
constexpr uint16_t kServerNameExtension = 0;
constexpr uint8_t kHostName = 0;
constexpr size_t kMaxRecordPayload = 16384;  // TLSPlaintext.length <= 2^14

// A cursor over untrusted bytes: every read says whether it fit.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  size_t left() const { return bytes_.size(); }
  bool u8(uint8_t& out) {
    if (bytes_.empty()) return false;
    out = static_cast<uint8_t>(bytes_[0]);
    bytes_.remove_prefix(1);
    return true;
  }
  bool u16(uint16_t& out) {
    if (bytes_.size() < 2) return false;
    out = static_cast<uint16_t>((static_cast<uint8_t>(bytes_[0]) << 8) |
                                static_cast<uint8_t>(bytes_[1]));
    bytes_.remove_prefix(2);
    return true;
  }
  bool u24(uint32_t& out) {
    if (bytes_.size() < 3) return false;
    out = (uint32_t{static_cast<uint8_t>(bytes_[0])} << 16) |
          (uint32_t{static_cast<uint8_t>(bytes_[1])} << 8) | static_cast<uint8_t>(bytes_[2]);
    bytes_.remove_prefix(3);
    return true;
  }
  bool take(size_t n, std::string_view& out) {
    if (bytes_.size() < n) return false;
    out = bytes_.substr(0, n);
    bytes_.remove_prefix(n);
    return true;
  }
  bool skip(size_t n) {
    std::string_view ignored;
    return take(n, ignored);
  }

 private:
  std::string_view bytes_;
};

ClientHelloScan malformed(std::string why) {
  ClientHelloScan scan;
  scan.status = ClientHelloScan::Status::malformed;
  scan.error = std::move(why);
  return scan;
}

// The server_name extension's body: ServerNameList.
ClientHelloScan read_server_name(std::string_view body, ClientHelloScan scan) {
  Reader r(body);
  uint16_t list_length;
  std::string_view list;
  if (!r.u16(list_length) || !r.take(list_length, list) || r.left() != 0 || list_length == 0)
    return malformed("a malformed server_name extension");
  Reader names(list);
  while (names.left() > 0) {
    uint8_t type;
    uint16_t length;
    std::string_view name;
    if (!names.u8(type) || !names.u16(length) || !names.take(length, name))
      return malformed("a malformed server_name entry");
    if (type != kHostName) continue;  // no other type is defined; skip rather than guess
    if (scan.server_name) return malformed("more than one host_name in server_name");
    if (name.empty()) return malformed("an empty host_name in server_name");
    scan.server_name = std::string(name);
  }
  return scan;
}

ClientHelloScan read_client_hello(std::string_view body) {
  Reader r(body);
  uint16_t version;
  uint8_t session_length, compression_length;
  uint16_t suites_length;
  if (!r.u16(version) || !r.skip(32) || !r.u8(session_length) || session_length > 32 ||
      !r.skip(session_length) || !r.u16(suites_length) || !r.skip(suites_length) ||
      !r.u8(compression_length) || !r.skip(compression_length))
    return malformed("a truncated ClientHello");
  ClientHelloScan scan;
  scan.status = ClientHelloScan::Status::complete;
  if (r.left() == 0) return scan;  // no extensions at all (TLS 1.2 allows it): no name
  uint16_t extensions_length;
  std::string_view extensions;
  if (!r.u16(extensions_length) || !r.take(extensions_length, extensions) || r.left() != 0)
    return malformed("a malformed extensions block");
  Reader e(extensions);
  bool seen_server_name = false;
  while (e.left() > 0) {
    uint16_t type, length;
    std::string_view data;
    if (!e.u16(type) || !e.u16(length) || !e.take(length, data))
      return malformed("a malformed extension");
    if (type != kServerNameExtension) continue;
    if (seen_server_name) return malformed("more than one server_name extension");
    seen_server_name = true;
    scan = read_server_name(data, scan);
    if (scan.status == ClientHelloScan::Status::malformed) return scan;
  }
  return scan;
}

}  // namespace

ClientHelloScan scan_client_hello(std::string_view bytes, size_t max_bytes) {
  // Gather the handshake layer's bytes from consecutive handshake records until the first
  // message (it must be the ClientHello) is whole.
  std::string handshake;
  size_t offset = 0;
  for (;;) {
    if (offset >= max_bytes)
      return malformed("a ClientHello larger than " + std::to_string(max_bytes) + " bytes");
    if (bytes.size() - offset < 5) return {};
    auto type = static_cast<uint8_t>(bytes[offset]);
    auto major = static_cast<uint8_t>(bytes[offset + 1]);
    size_t length = (size_t{static_cast<uint8_t>(bytes[offset + 3])} << 8) |
                    static_cast<uint8_t>(bytes[offset + 4]);
    if (type != kHandshakeRecord || major != 3) return malformed("not a TLS handshake record");
    if (length == 0 || length > kMaxRecordPayload) return malformed("a TLS record of a bad length");
    if (offset + 5 + length > max_bytes)
      return malformed("a ClientHello larger than " + std::to_string(max_bytes) + " bytes");
    if (bytes.size() - offset - 5 < length) return {};
    handshake.append(bytes.substr(offset + 5, length));
    offset += 5 + length;
    if (handshake.size() < 4) continue;
    if (static_cast<uint8_t>(handshake[0]) != kClientHello)
      return malformed("the first handshake message is not a ClientHello");
    Reader header(handshake);
    uint8_t ignored = 0;
    uint32_t body_length = 0;  // four bytes are there: both reads succeed
    header.u8(ignored);
    header.u24(body_length);
    if (4 + size_t{body_length} > max_bytes)
      return malformed("a ClientHello larger than " + std::to_string(max_bytes) + " bytes");
    if (handshake.size() < 4 + size_t{body_length}) continue;
    return read_client_hello(std::string_view(handshake).substr(4, body_length));
  }
}

std::string_view tls_access_denied_alert() {
  // Alert record, TLS 1.0 record version (any client accepts it), fatal (2), access_denied (49).
  static constexpr char kAlert[] = {0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x31};
  return {kAlert, sizeof kAlert};
}

}  // namespace belljar
