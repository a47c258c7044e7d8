#pragma once
// The server name (SNI) a TLS client asks for, read from the first bytes it sends through a
// CONNECT tunnel.
//
// The threat: domain fronting. A CONNECT to an allowlisted host that sits on a shared front end
// (a CDN) can carry a ClientHello naming another site on the same front end, which then serves
// that site: the allowlist is bypassed without the proxy ever seeing a forbidden name. The
// proxy reads the ClientHello before forwarding a byte, and refuses a tunnel whose SNI is not
// the host it allowed (egress_proxy.cpp).
//
// The bytes come from the sandbox: every length is checked against what is there and against
// `max_bytes`, nothing is copied but the name, and a ClientHello split over several records
// (or arriving a few bytes at a time) is reassembled within that bound.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace belljar {

struct ClientHelloScan {
  enum class Status {
    incomplete,  // a valid prefix: more bytes are needed
    complete,    // a whole ClientHello; server_name is its host_name, if it has one
    malformed,   // not a TLS ClientHello, or one the proxy refuses; `error` says why
  };
  Status status = Status::incomplete;
  std::optional<std::string> server_name;  // as sent (the caller normalises it)
  std::string error;
};

// Scans what the client has sent so far. More than `max_bytes` of records before the
// ClientHello is whole is malformed ("larger than ..."). Several host_name entries, or several
// server_name extensions, are malformed too: which one a server would pick is its own choice.
ClientHelloScan scan_client_hello(std::string_view bytes, size_t max_bytes = 16384);

// A fatal TLS alert record (access_denied), sent before closing a refused tunnel so the client's
// TLS library reports a refusal rather than a reset.
std::string_view tls_access_denied_alert();

}  // namespace belljar
