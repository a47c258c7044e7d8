#include "sandbox/egress/session_ca.hpp"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace belljar {

namespace {

constexpr long kValidBefore = 3600;          // an hour back: clocks disagree a little
constexpr long kValidFor = 30L * 24 * 3600;  // longer than any kernel runs

[[noreturn]] void fail(const std::string& step) {
  throw std::runtime_error("TLS setup: " + step + ": " + openssl_error_text());
}

// Every certificate in `pem` added to `store`; how many.
size_t add_certificates(X509_STORE* store, const std::string& pem) {
  BIO* in = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (!in) fail("BIO_new_mem_buf");
  size_t added = 0;
  while (X509* certificate = PEM_read_bio_X509(in, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, certificate) == 1) ++added;
    X509_free(certificate);
  }
  BIO_free(in);
  ERR_clear_error();  // the end of the text reads as an error
  return added;
}

OpenSslPtr<EVP_PKEY> new_key() {
  OpenSslPtr<EVP_PKEY> key(EVP_EC_gen("P-256"));
  if (!key) fail("EVP_EC_gen(P-256)");
  return key;
}

void add_extension(X509* certificate, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, certificate, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!extension) fail(std::string("the extension ") + OBJ_nid2sn(nid) + " = " + value);
  int added = X509_add_ext(certificate, extension, -1);
  X509_EXTENSION_free(extension);
  if (!added) fail(std::string("X509_add_ext(") + OBJ_nid2sn(nid) + ")");
}

// A certificate for `subject_key` named `common_name`, signed by `signer` (issued by `issuer`,
// itself when null), without extensions yet.
OpenSslPtr<X509> new_certificate(EVP_PKEY* subject_key, const std::string& common_name,
                                 X509* issuer) {
  OpenSslPtr<X509> certificate(X509_new());
  if (!certificate || !X509_set_version(certificate.get(), 2)) fail("X509_new");
  BIGNUM* serial = BN_new();
  bool serial_set = serial && BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
                    BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(certificate.get()));
  BN_free(serial);
  if (!serial_set) fail("a random serial number");
  X509_gmtime_adj(X509_getm_notBefore(certificate.get()), -kValidBefore);
  X509_gmtime_adj(X509_getm_notAfter(certificate.get()), kValidFor);
  X509_NAME* name = X509_get_subject_name(certificate.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("belljar"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()),
                             static_cast<int>(std::min<size_t>(common_name.size(), 64)), -1, 0);
  X509_set_issuer_name(certificate.get(), issuer ? X509_get_subject_name(issuer) : name);
  if (!X509_set_pubkey(certificate.get(), subject_key)) fail("X509_set_pubkey");
  return certificate;
}

// "IP:10.0.0.5/255.255.255.255" or the IPv6 form: exactly that address.
std::string address_constraint(const IpAddress& address) {
  return "IP:" + address.text() +
         (address.family == AF_INET ? "/255.255.255.255"
                                    : "/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
}

int select_http1(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                 unsigned int inlen, void*) {
  for (unsigned int i = 0; i < inlen;) {
    unsigned int length = in[i];
    if (i + 1 + length > inlen) break;
    if (length == 8 &&
        std::string_view(reinterpret_cast<const char*>(in + i + 1), 8) == "http/1.1") {
      *out = in + i + 1;
      *outlen = 8;
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + length;
  }
  // Only HTTP/1.1 is brokered: a client that offers only h2 is told so by the alert.
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

}  // namespace

std::string openssl_error_text() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(code, line, sizeof line);
    text = line;  // the last one is the most specific
  }
  return text.empty() ? "no detail from OpenSSL" : text;
}

SessionCa::SessionCa(const std::vector<HostRule>& bound_hosts)
    : key_(new_key()), leaf_key_(new_key()) {
  certificate_ = new_certificate(key_.get(), "belljar session CA", nullptr);
  add_extension(certificate_.get(), certificate_.get(), NID_basic_constraints,
                "critical,CA:TRUE,pathlen:0");
  add_extension(certificate_.get(), certificate_.get(), NID_key_usage,
                "critical,keyCertSign,cRLSign");
  add_extension(certificate_.get(), certificate_.get(), NID_subject_key_identifier, "hash");
  std::string permitted;
  for (const auto& rule : bound_hosts) {
    std::string host = rule.host.rfind("*.", 0) == 0 ? rule.host.substr(2) : rule.host;
    auto address = IpAddress::parse(host);
    permitted += (permitted.empty() ? "" : ",") + std::string("permitted;") +
                 (address ? address_constraint(*address) : "DNS:" + host);
  }
  if (!permitted.empty())
    add_extension(certificate_.get(), certificate_.get(), NID_name_constraints,
                  "critical," + permitted);
  if (!X509_sign(certificate_.get(), key_.get(), EVP_sha256())) fail("X509_sign(the CA)");

  BIO* pem = BIO_new(BIO_s_mem());
  if (!pem || !PEM_write_bio_X509(pem, certificate_.get())) fail("PEM_write_bio_X509");
  char* data = nullptr;
  long length = BIO_get_mem_data(pem, &data);
  certificate_pem_.assign(data, static_cast<size_t>(length));
  BIO_free(pem);

  server_.reset(SSL_CTX_new(TLS_server_method()));
  if (!server_) fail("SSL_CTX_new(server)");
  SSL_CTX_set_min_proto_version(server_.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(server_.get(), SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_num_tickets(server_.get(), 0);  // no resumption: one CA per session anyway
  SSL_CTX_set_mode(server_.get(), SSL_MODE_ENABLE_PARTIAL_WRITE);
  SSL_CTX_set_alpn_select_cb(server_.get(), select_http1, nullptr);
}

std::string SessionCa::bundle_pem() const {
  std::string bundle;
  std::ifstream system(X509_get_default_cert_file(), std::ios::binary);
  if (system) {
    std::ostringstream text;
    text << system.rdbuf();
    bundle = text.str();
    if (!bundle.empty() && bundle.back() != '\n') bundle += '\n';
  }
  return bundle + "# belljar session CA (this kernel's egress proxy, for hosts with --secret)\n" +
         certificate_pem_;
}

X509* SessionCa::leaf_for(const RequestHost& host) {
  if (auto it = leaves_.find(host.name); it != leaves_.end()) return it->second.get();
  OpenSslPtr<X509> leaf = new_certificate(leaf_key_.get(), host.name, certificate_.get());
  X509* issuer = certificate_.get();
  add_extension(leaf.get(), issuer, NID_basic_constraints, "critical,CA:FALSE");
  add_extension(leaf.get(), issuer, NID_key_usage, "critical,digitalSignature");
  add_extension(leaf.get(), issuer, NID_ext_key_usage, "serverAuth");
  add_extension(leaf.get(), issuer, NID_subject_key_identifier, "hash");
  add_extension(leaf.get(), issuer, NID_authority_key_identifier, "keyid:always");
  add_extension(leaf.get(), issuer, NID_subject_alt_name,
                (host.literal ? "IP:" : "DNS:") + host.name);
  if (!X509_sign(leaf.get(), key_.get(), EVP_sha256())) fail("X509_sign(a leaf)");
  if (leaves_.size() >= 1024) leaves_.clear();  // a wildcard binding's names, bounded
  return leaves_.emplace(host.name, std::move(leaf)).first->second.get();
}

OpenSslPtr<SSL> SessionCa::server_session(const RequestHost& host, std::string& error) {
  try {
    X509* leaf = leaf_for(host);
    OpenSslPtr<SSL> ssl(SSL_new(server_.get()));
    if (!ssl || SSL_use_certificate(ssl.get(), leaf) != 1 ||
        SSL_use_PrivateKey(ssl.get(), leaf_key_.get()) != 1)
      fail("a server session for " + host.name);
    SSL_set_accept_state(ssl.get());
    return ssl;
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
}

UpstreamTls::UpstreamTls(const std::string& extra_pem)
    : context_(SSL_CTX_new(TLS_client_method())) {
  if (!context_) fail("SSL_CTX_new(client)");
  SSL_CTX_set_min_proto_version(context_.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(context_.get(), SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(context_.get(), SSL_MODE_ENABLE_PARTIAL_WRITE);
  // The built-in file and folder, as SSL_CTX_set_default_verify_paths would take them were
  // SSL_CERT_FILE and SSL_CERT_DIR unset; either may be missing on a host.
  X509_STORE* store = SSL_CTX_get_cert_store(context_.get());
  X509_STORE_load_file(store, X509_get_default_cert_file());
  X509_STORE_load_path(store, X509_get_default_cert_dir());
  ERR_clear_error();
  if (!extra_pem.empty()) {
    size_t added = add_certificates(store, extra_pem);
    if (added == 0) fail("--upstream-ca: no PEM certificate");
  }
  static const unsigned char alpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(context_.get(), alpn, sizeof alpn);
}

OpenSslPtr<SSL> UpstreamTls::client_session(const RequestHost& host, std::string& error) {
  OpenSslPtr<SSL> ssl(SSL_new(context_.get()));
  bool ok = ssl != nullptr;
  if (ok && host.literal) {
    ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), host.name.c_str()) == 1;
  } else if (ok) {
    ok = SSL_set_tlsext_host_name(ssl.get(), host.name.c_str()) == 1 &&
         SSL_set1_host(ssl.get(), host.name.c_str()) == 1;
  }
  if (!ok) {
    error = "a TLS session to " + host.name + ": " + openssl_error_text();
    return nullptr;
  }
  SSL_set_connect_state(ssl.get());
  return ssl;
}

}  // namespace belljar
