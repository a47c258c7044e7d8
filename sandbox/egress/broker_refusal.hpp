#pragma once
// The secret broker's own answers (brokered_http.hpp, brokered_tunnel.hpp): why it would not
// forward a request or pass a response on, as one closed set of reasons, each spelled once
// here with its status, its failure (egress_decision.hpp) and its sentence.
//
// The threat is a bound host that reflects what it was sent: a request's headers carry the
// real value of a secret, and such a host can put them anywhere in its answer, including the
// very header the broker refuses (Transfer-Encoding, Content-Encoding, a malformed head). The
// refusal goes to the sandbox (the 4xx/5xx body), to the audit log (`detail`) and to the
// metrics, none of which may ever hold a value; the stream scrubber never sees the proxy's own
// text. So a refusal is made only from a BrokerReason, never from bytes that came from upstream
// (nor from the sandbox): there is no field to put them in.
#include <string_view>

#include "sandbox/egress_api/egress_decision.hpp"

namespace belljar {

enum class BrokerReason {
  // requests (the sandbox's)
  malformed_request,
  malformed_request_body,
  request_head_too_large,
  not_http11,
  upgrade,
  range_request,
  // responses (the bound host's)
  malformed_response,
  response_head_too_large,
  closed_in_head,
  closed_in_body,
  closed_without_answer,
  unasked_response,
  protocol_switch,
  transfer_coding,
  malformed_content_length,
  malformed_chunked_response,
  compressed_body,
};

// The proxy's own answer instead of a message it will not forward; the connection closes after.
struct BrokerRefusal {
  explicit BrokerRefusal(BrokerReason why);

  BrokerReason reason;
  int status;
  const char* reason_phrase;
  EgressFailure failure;
  // The one sentence for the sandbox's body and the audit log's detail: ours, fixed.
  std::string_view why() const;
};

}  // namespace belljar
