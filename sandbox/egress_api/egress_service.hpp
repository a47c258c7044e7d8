#pragma once
// The egress proxy as the supervisor sees it. The proxy itself (sandbox/egress: its thread, the
// connections, the TLS broker for bound secrets) is built into a module of its own,
// belljar-egress.so, linked with OpenSSL, and loaded only by a kernel whose policy allows a host
// (egress_module.hpp): a kernel that allows none maps neither the proxy nor OpenSSL, about 1 MB
// proportional and 2 MB resident less for each of a host's hundreds of idle kernels.
//
// This folder is what both sides share: the rules (allowlist, address_policy), the bound
// secrets as read by the supervisor (bound_secrets), the decisions the proxy queues for the
// reactor (egress_decision), the limits, and this interface. Nothing here includes OpenSSL.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/egress_api/bound_secrets.hpp"
#include "sandbox/egress_api/egress_decision.hpp"
#include "sandbox/egress_api/egress_limits.hpp"
#include "sandbox/os/fd.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

struct EgressStart {
  std::vector<HostRule> rules;  // --allow-net, with the hosts bound secrets imply
  EgressLimits limits;
  // The values bound to hosts (--secret); with any, the proxy makes the session's CA and
  // terminates TLS to those hosts. Null or empty: every tunnel is relayed untouched.
  std::shared_ptr<const BoundSecrets> secrets;
  // --upstream-ca's certificates (PEM, read by the supervisor at start), trusted beside the
  // host's store when the proxy verifies a bound host.
  std::string upstream_ca_pem;
};

class EgressService {
 public:
  virtual ~EgressService() = default;  // stops the proxy's thread; every connection is closed

  // Thread-safe. A sandbox's end of the SOCK_SEQPACKET pair; connections arrive on it until the
  // sandbox's end closes (the jail is gone). A restarted worker attaches its new one.
  virtual void attach(Fd channel) = 0;
  // Readable (an eventfd) when decisions are waiting; take_decisions() empties it.
  virtual int decisions_fd() const = 0;
  virtual DecisionQueue::Taken take_decisions() = 0;
  // Connections the proxy holds right now (tests check that they are freed).
  virtual size_t open_connections() const = 0;
  // Thread-safe: the CPU seconds the proxy's thread has used so far. The supervisor adds it to
  // the session's CPU: relaying what the sandbox sends is no way around --cpu (the outside
  // attack on round three: 7.3 s of the proxy's CPU per 3 s of the session's).
  virtual double cpu_seconds() const = 0;
  // The trust bundle the sandbox gets (the system's CAs and the session's CA); "" when no
  // secret is bound and the sandbox's trust is left as it is.
  virtual std::string ca_bundle_pem() const = 0;
};

// The module's one entry point, looked up by name. It never throws across the boundary: on
// failure it returns null with `error` set (a CA that could not be made, a thread that could
// not start).
inline constexpr const char* kEgressEntryPoint = "belljar_egress_start";
using EgressEntryPoint = EgressService* (*)(const EgressStart& start, std::string& error);

}  // namespace belljar
