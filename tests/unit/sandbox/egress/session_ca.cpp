// The per-session CA: what a client in the sandbox checks (a leaf for the host, issued by the
// CA it trusts) and what no one can make it vouch for (a host outside its name constraints).
#include "sandbox/egress/session_ca.hpp"

#include <openssl/pem.h>
#include <openssl/x509_vfy.h>

#include <catch2/catch.hpp>

using namespace belljar;

namespace {

// Verifies the leaf `ssl` presents against a store holding only the CA; the X509_V_ result.
int verify_leaf(const SessionCa& ca, SSL* ssl, const char* host) {
  BIO* pem =
      BIO_new_mem_buf(ca.certificate_pem().data(), static_cast<int>(ca.certificate_pem().size()));
  X509* root = PEM_read_bio_X509(pem, nullptr, nullptr, nullptr);
  BIO_free(pem);
  REQUIRE(root);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, root);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, SSL_get_certificate(ssl), nullptr);
  X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), host, 0);
  X509_verify_cert(ctx);
  int result = X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(root);
  return result;
}

}  // namespace

TEST_CASE("a leaf for a bound host verifies against the session CA, for that name only") {
  SessionCa ca({parse_secret_binding("--secret", "K@api.example.com", false).host,
                parse_secret_binding("--secret", "K@*.example.org", false).host});
  CHECK(ca.certificate_pem().rfind("-----BEGIN CERTIFICATE-----", 0) == 0);
  CHECK(ca.bundle_pem().find(ca.certificate_pem()) != std::string::npos);

  std::string error;
  auto ssl = ca.server_session(*normalize_host("api.example.com"), error);
  REQUIRE(ssl);
  CHECK(verify_leaf(ca, ssl.get(), "api.example.com") == X509_V_OK);
  CHECK(verify_leaf(ca, ssl.get(), "evil.example.net") == X509_V_ERR_HOSTNAME_MISMATCH);
  auto sub = ca.server_session(*normalize_host("deep.sub.example.org"), error);
  REQUIRE(sub);
  CHECK(verify_leaf(ca, sub.get(), "deep.sub.example.org") == X509_V_OK);
}

TEST_CASE("the CA's name constraints refuse a leaf for a host no secret is bound to") {
  SessionCa ca({parse_secret_binding("--secret", "K@api.example.com", false).host});
  std::string error;
  auto ssl = ca.server_session(*normalize_host("bank.example.net"), error);
  REQUIRE(ssl);
  CHECK(verify_leaf(ca, ssl.get(), "bank.example.net") == X509_V_ERR_PERMITTED_VIOLATION);
}

TEST_CASE("two sessions never share a CA") {
  std::vector<HostRule> hosts = {parse_secret_binding("--secret", "K@api.example.com", false).host};
  CHECK(SessionCa(hosts).certificate_pem() != SessionCa(hosts).certificate_pem());
}
