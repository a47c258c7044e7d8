#pragma once
// HTTP/1.1 inside a TLS tunnel the egress proxy terminates for a host with a bound secret
// (--secret NAME@HOST): the requests the sandbox sends, rewritten for upstream, and the
// responses upstream sends, rewritten for the sandbox. Bytes in, bytes out: no sockets and no
// TLS here (brokered_tunnel.hpp does those), so every rule can be tested with split reads.
//
// Requests: each head is parsed strictly (http_head.hpp); the placeholder of each secret bound
// to this host is replaced by its value in every header value (never the target, which hosts
// store and show, nor the body); Host is the
// bound host, whatever the client wrote; Accept-Encoding is identity, so responses can be read.
// Bodies go through unchanged, framed by their one Content-Length or chunked encoding
// (chunked_body.hpp), so both ends agree where the next request starts (keep-alive,
// pipelining). HTTP/1.0, Upgrade, Range and If-Range are refused: a host that reflects a header
// would give back a range of it, each slice too short for the scrubber to recognise.
//
// Responses: every secret's value is replaced by its placeholder in the head and the body,
// even split across reads (stream_scrubber.hpp). The body is re-framed as chunked, since its
// length changes; trailers are dropped. Headers that measure or hash upstream's bytes
// (Content-Length, Content-Range, digests) never pass, a bodiless response's (HEAD, 204, 304)
// included: the length of an echo would give away the length of a value. A compressed body could
// hide a value, so one is refused (502) rather than passed. Refusals say only what
// broker_refusal.hpp spells, never what upstream sent. Each exchange is measured: latency,
// status, token usage (model_usage.hpp).
//
// The threat is the sandbox on one side and anything upstream on the other: the sandbox
// smuggling a second request past the rewrite, or getting a value echoed back.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/egress/broker_refusal.hpp"
#include "sandbox/egress/chunked_body.hpp"
#include "sandbox/egress/model_usage.hpp"
#include "sandbox/egress/stream_scrubber.hpp"
#include "sandbox/egress_api/bound_secrets.hpp"
#include "sandbox/egress_api/egress_decision.hpp"

namespace belljar {

struct BrokeredExchange {
  std::string method;
  SecretUse use;
};

class BrokeredHttp {
 public:
  // `bound`: the secrets bound to this host (their placeholders are replaced in requests);
  // `all`: every bound secret (their values are replaced in responses). `host_header`: the
  // bound host as Host names it ("api.example.com", "localhost:8443").
  BrokeredHttp(std::vector<const BoundSecret*> bound, const BoundSecrets& all,
               std::string host_header);

  // The client's plaintext to the upstream's: consumes from `in` what it used, appends to
  // `out`. A refusal means nothing more goes upstream.
  std::optional<BrokerRefusal> from_client(std::string& in, std::string& out);
  // The upstream's plaintext to the client's; `upstream_done` when upstream closed.
  std::optional<BrokerRefusal> from_upstream(std::string& in, std::string& out, bool upstream_done);

  // Too many requests in flight: stop reading the client until responses come.
  bool client_paused() const { return exchanges_.size() >= kMaxInFlight; }
  bool in_flight() const { return !exchanges_.empty(); }
  // The connection ends after the response in progress (Connection: close, a body that ends
  // when upstream closes, an HTTP/1.0 upstream).
  bool closing() const { return closing_ && exchanges_.empty(); }
  // Part of a response went to the client already: a refusal can only end the connection.
  bool mid_response() const { return in_response_; }
  std::vector<BrokeredExchange> take_finished();

  static constexpr size_t kMaxHead = 64 * 1024;
  static constexpr size_t kMaxInFlight = 16;

 private:
  using Clock = std::chrono::steady_clock;
  struct Exchange {
    std::string method;
    bool injected = false;
    Clock::time_point started;
  };
  enum class Body { none, length, chunked, until_close };

  std::optional<BrokerRefusal> start_request(std::string& in, size_t head_length, std::string& out);
  std::optional<BrokerRefusal> start_response(std::string& in, size_t head_length,
                                              std::string& out);
  void body_data(std::string_view data, std::string& out);
  void finish_response(std::string& out);

  std::vector<const BoundSecret*> bound_;
  std::vector<std::string> names_;
  std::string host_header_;
  std::vector<std::pair<std::string, std::string>> value_to_placeholder_;

  Body request_body_ = Body::none;
  uint64_t request_left_ = 0;
  ChunkedBody request_chunks_;

  std::deque<Exchange> exchanges_;
  Body response_body_ = Body::none;
  bool in_response_ = false;
  uint64_t response_left_ = 0;
  ChunkedBody response_chunks_;
  std::optional<StreamScrubber> scrubber_;
  std::optional<UsageReader> usage_;
  int status_ = 0;
  bool closing_ = false;
  std::vector<BrokeredExchange> finished_;
};

}  // namespace belljar
