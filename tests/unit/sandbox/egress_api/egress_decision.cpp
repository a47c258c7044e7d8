// The egress proxy's reasons: one enum, one name each on the wire and in the audit log, and one
// verdict each (sandbox/egress_api/egress_decision.hpp).
#include "sandbox/egress_api/egress_decision.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <string>

using namespace belljar;

TEST_CASE("each egress failure has its own wire name and verdict", "[egress][decision]") {
  const EgressFailure denied[] = {
      EgressFailure::not_allowlisted,  EgressFailure::port_not_allowed,
      EgressFailure::private_address,  EgressFailure::bad_request,
      EgressFailure::sni_mismatch,     EgressFailure::sni_missing,
      EgressFailure::secret_needs_tls, EgressFailure::secret_unsupported};
  const EgressFailure failed[] = {EgressFailure::resolve_failed,
                                  EgressFailure::connect_failed,
                                  EgressFailure::timeout,
                                  EgressFailure::too_many_connections,
                                  EgressFailure::upstream_certificate,
                                  EgressFailure::upstream_response,
                                  EgressFailure::compressed_response};
  std::set<std::string> names;
  for (auto f : denied) {
    CHECK(verdict_of(f) == EgressVerdict::denied);
    CHECK(names.insert(std::string(failure_name(f))).second);
  }
  for (auto f : failed) {
    CHECK(verdict_of(f) == EgressVerdict::failed);
    CHECK(names.insert(std::string(failure_name(f))).second);
  }
  CHECK_FALSE(names.count(""));
  CHECK(verdict_of(EgressFailure::none) == EgressVerdict::allowed);
  CHECK(failure_name(EgressFailure::none).empty());
  CHECK(failure_name(EgressFailure::sni_mismatch) == "sni-mismatch");
  CHECK(verdict_name(EgressVerdict::denied) == "denied");
  EgressDecision d;
  d.decision = EgressVerdict::failed;
  d.reason = EgressFailure::too_many_connections;
  CHECK(d.decision == "failed");  // reads as its name
  CHECK(d.reason == "too-many-connections");
}
