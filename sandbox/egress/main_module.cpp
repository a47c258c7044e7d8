// belljar-egress.so's entry point: the proxy (egress_proxy.hpp) behind the interface the
// supervisor holds (sandbox/egress_api/egress_service.hpp). Everything else in the module is
// hidden (-fvisibility=hidden, --exclude-libs): it neither exports nor interposes anything.
#include <openssl/ssl.h>

#include <type_traits>

#include "sandbox/egress/egress_proxy.hpp"
#include "sandbox/egress/session_ca.hpp"
#include "sandbox/egress_api/egress_service.hpp"
#include "sandbox/os/installed_file.hpp"

namespace belljar {
namespace {

// With bound secrets, the session's CA for exactly their hosts (session_ca.hpp).
SecretBroker broker_for(const EgressStart& start) {
  SecretBroker broker;
  if (!start.secrets || start.secrets->empty()) return broker;
  std::vector<HostRule> hosts;
  for (const BoundSecret& secret : start.secrets->all())
    hosts.insert(hosts.end(), secret.hosts.begin(), secret.hosts.end());
  broker.secrets = start.secrets;
  broker.ca = std::make_shared<SessionCa>(hosts);
  broker.upstream_ca_pem = start.upstream_ca_pem;
  // A file with no certificate stops the kernel now, not the first request to the host.
  if (!start.upstream_ca_pem.empty()) UpstreamTls check(start.upstream_ca_pem);
  return broker;
}

class ProxyService final : public EgressService {
 public:
  ProxyService(const EgressStart& start, SecretBroker broker)
      : ca_bundle_(broker.ca ? broker.ca->bundle_pem() : std::string()),
        proxy_(start.rules, start.limits, system_resolve, std::move(broker)) {}

  void attach(Fd channel) override { proxy_.attach(std::move(channel)); }
  int decisions_fd() const override { return proxy_.decisions_fd(); }
  DecisionQueue::Taken take_decisions() override { return proxy_.take_decisions(); }
  size_t open_connections() const override { return proxy_.open_connections(); }
  double cpu_seconds() const override { return proxy_.thread_cpu_seconds(); }
  std::string ca_bundle_pem() const override { return ca_bundle_; }

 private:
  std::string ca_bundle_;
  EgressProxy proxy_;
};

}  // namespace
}  // namespace belljar

extern "C" __attribute__((visibility("default"))) belljar::EgressService* belljar_egress_start(
    const belljar::EgressStart& start, std::string& error) {
  // Before any other OpenSSL call: no configuration file (OPENSSL_CONF in the environment could
  // name one that loads providers or changes what TLS accepts).
  if (OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) != 1) {
    error = "OpenSSL could not be initialised";
    return nullptr;
  }
  return belljar::made_or_null(
      [&] { return new belljar::ProxyService(start, belljar::broker_for(start)); }, error);
}
static_assert(std::is_same_v<decltype(&belljar_egress_start), belljar::EgressEntryPoint>,
              "the entry point's type is the one egress_service.hpp names");
