#pragma once
// The per-session certificate authority the egress proxy terminates TLS with, for hosts that
// have a bound secret (bound_secrets.hpp) and for no other.
//
// Made with OpenSSL when the kernel starts: an EC P-256 key that exists only in the
// supervisor's memory, and a self-signed CA certificate whose name constraints permit only the
// bound hosts, so even a leaked key could not vouch for anything else. Leaf certificates are
// made on demand, one per host name or address, and kept for the session. The sandbox trusts
// the CA through a bundle (bundle_pem(): the system CAs and this one) that the jail writes
// inside; a session that binds no secret has no CA and the sandbox's trust is untouched.
#include <openssl/ssl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/egress_api/allowlist.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

struct OpenSslFree {
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
  void operator()(SSL* p) const { SSL_free(p); }
};
template <typename T>
using OpenSslPtr = std::unique_ptr<T, OpenSslFree>;

// The last OpenSSL error queue as one line ("...: certificate verify failed"), emptied.
std::string openssl_error_text();

class SessionCa {
 public:
  // Throws std::runtime_error naming the OpenSSL step that failed.
  explicit SessionCa(const std::vector<HostRule>& bound_hosts);

  const std::string& certificate_pem() const { return certificate_pem_; }
  // The system's CA bundle (OpenSSL's default file, when readable) followed by this CA.
  std::string bundle_pem() const;

  // A server-side TLS session presenting a leaf certificate for HOST; ALPN selects http/1.1
  // only (an h2-only client is refused). Null with `error` set when it cannot be made.
  OpenSslPtr<SSL> server_session(const RequestHost& host, std::string& error);

 private:
  X509* leaf_for(const RequestHost& host);
  OpenSslPtr<EVP_PKEY> key_;  // the CA's, and (one per session) the leaves'
  OpenSslPtr<EVP_PKEY> leaf_key_;
  OpenSslPtr<X509> certificate_;
  OpenSslPtr<SSL_CTX> server_;
  std::string certificate_pem_;
  std::map<std::string, OpenSslPtr<X509>> leaves_;
};

// The client side towards the real server: TLS 1.2 or later, the peer's certificate verified
// against the host's trust store and the CAs of --upstream-ca, and its name (or address)
// checked; ALPN http/1.1. The store is read by OpenSSL's built-in paths, never by
// SSL_CERT_FILE or SSL_CERT_DIR: whatever can set a variable in the kernel's environment (a
// server's, a spawner's configuration) must not decide whom a --secret is sent to.
class UpstreamTls {
 public:
  // `extra_pem`: certificates to trust beside the host's store (may be empty).
  explicit UpstreamTls(const std::string& extra_pem = {});
  OpenSslPtr<SSL> client_session(const RequestHost& host, std::string& error);

 private:
  OpenSslPtr<SSL_CTX> context_;
};

}  // namespace belljar
