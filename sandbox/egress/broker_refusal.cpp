// The secret broker's refusals, each spelled once (broker_refusal.hpp).
#include "sandbox/egress/broker_refusal.hpp"

namespace belljar {

namespace {

struct Spelling {
  int status;
  const char* phrase;
  EgressFailure failure;
  const char* why;
};

constexpr EgressFailure kRequest = EgressFailure::secret_unsupported;
constexpr EgressFailure kResponse = EgressFailure::upstream_response;

Spelling spelling(BrokerReason reason) {
  switch (reason) {
    case BrokerReason::malformed_request:
      return {400, "Bad Request", kRequest, "a malformed request head"};
    case BrokerReason::malformed_request_body:
      return {400, "Bad Request", kRequest, "a malformed chunked request body"};
    case BrokerReason::request_head_too_large:
      return {431, "Request Header Fields Too Large", kRequest,
              "a request head larger than 64 KiB"};
    case BrokerReason::not_http11:
      return {505, "HTTP Version Not Supported", kRequest,
              "only HTTP/1.1 requests carry a bound secret"};
    case BrokerReason::upgrade:
      return {501, "Not Implemented", kRequest,
              "Upgrade is not brokered on a host with a bound secret"};
    case BrokerReason::range_request:
      return {403, "Forbidden", kRequest,
              "Range and If-Range are not forwarded to a host with a bound secret: slices of a "
              "reflected value would each be too short to recognise; ask for the whole resource"};
    case BrokerReason::malformed_response:
      return {502, "Bad Gateway", kResponse, "the upstream sent a malformed response head"};
    case BrokerReason::response_head_too_large:
      return {502, "Bad Gateway", kResponse, "the upstream sent a response head over 64 KiB"};
    case BrokerReason::closed_in_head:
      return {502, "Bad Gateway", kResponse, "the upstream closed inside a response head"};
    case BrokerReason::closed_in_body:
      return {502, "Bad Gateway", kResponse, "the upstream closed inside a response body"};
    case BrokerReason::closed_without_answer:
      return {502, "Bad Gateway", kResponse,
              "the upstream closed the connection without answering"};
    case BrokerReason::unasked_response:
      return {502, "Bad Gateway", kResponse, "the upstream sent a response to no request"};
    case BrokerReason::protocol_switch:
      return {502, "Bad Gateway", kResponse,
              "the upstream switched protocols, which was never asked for"};
    case BrokerReason::transfer_coding:
      return {502, "Bad Gateway", kResponse,
              "the upstream sent a Transfer-Encoding other than chunked"};
    case BrokerReason::malformed_content_length:
      return {502, "Bad Gateway", kResponse, "the upstream sent a malformed Content-Length"};
    case BrokerReason::malformed_chunked_response:
      return {502, "Bad Gateway", kResponse, "the upstream sent a malformed chunked body"};
    case BrokerReason::compressed_body:
      return {502, "Bad Gateway", EgressFailure::compressed_response,
              "the upstream sent an encoded (compressed) body, which could hide a secret's "
              "value; the proxy asked for identity"};
  }
  return {502, "Bad Gateway", kResponse, "the upstream's answer could not be brokered"};
}

}  // namespace

BrokerRefusal::BrokerRefusal(BrokerReason why) : reason(why) {
  Spelling s = spelling(why);
  status = s.status;
  reason_phrase = s.phrase;
  failure = s.failure;
}

std::string_view BrokerRefusal::why() const {
  return spelling(reason).why;
}

}  // namespace belljar
