#pragma once
// A tunnel the egress proxy terminates: TLS with the sandbox's client on one side (a leaf from
// the session CA, session_ca.hpp), TLS with the real server on the other (verified), and the
// HTTP/1.1 in between rewritten by brokered_http.hpp. Only a CONNECT to a host with a bound
// secret becomes one (egress_connection.cpp); every other tunnel stays end-to-end TLS.
//
// Both TLS sessions run on memory BIOs: the proxy's edge-triggered loop reads and writes the
// sockets, OpenSSL only ever sees bytes. Every queue is capped, and a side that sends faster
// than the other reads is simply not read (the backpressure), as in egress_relay.hpp. The
// ClientHello the proxy already read (to check its SNI) is handed in and goes first.
#include <optional>
#include <string>
#include <vector>

#include "sandbox/egress/brokered_http.hpp"
#include "sandbox/egress/egress_relay.hpp"
#include "sandbox/egress/session_ca.hpp"

namespace belljar {

struct TunnelFailure {
  EgressFailure reason;
  std::string why;
};

struct TunnelStep {
  bool moved = false;
  bool over = false;                        // the connection is finished: close it
  std::vector<BrokeredExchange> exchanges;  // finished this step; their ends are not sent yet
  std::optional<TunnelFailure> failure;     // what ended it badly, to record
};

class BrokeredTunnel {
 public:
  BrokeredTunnel(OpenSslPtr<SSL> client_tls, OpenSslPtr<SSL> upstream_tls, BrokeredHttp http,
                 std::string_view client_hello);
  TunnelStep step(Endpoint client, Endpoint upstream);

  static constexpr size_t kQueueCap = 64 * 1024;

 private:
  struct Side {
    OpenSslPtr<SSL> tls;
    BIO* in = nullptr;    // owned by tls: what the socket delivered
    BIO* out = nullptr;   // owned by tls: what goes to the socket
    std::string sending;  // ciphertext taken from `out`, not yet sent
    bool ready = false;   // handshake done
    bool closed = false;  // the peer is gone (end of file, close_notify or an error)
  };
  bool read_socket(Side& side, Endpoint end, TunnelStep& step);
  bool send_socket(Side& side, Endpoint end, TunnelStep& step);
  void handshake(Side& side, bool upstream, TunnelStep& step);
  void read_plain(Side& side, std::string& into, size_t cap, TunnelStep& step);
  void write_plain(Side& side, std::string& from, TunnelStep& step);
  void answer(const BrokerRefusal& refusal, TunnelStep& step);
  // Only for the handshakes, which end before any request (so before any value went out): their
  // text is ours and OpenSSL's. Everything after speaks through a BrokerRefusal.
  void answer(int status, const char* phrase, EgressFailure failure, const std::string& why,
              TunnelStep& step);

  Side client_, upstream_;
  BrokeredHttp http_;
  std::string up_plain_, up_ready_, down_plain_, down_ready_;
  std::optional<std::string> upstream_failed_;  // why the upstream's handshake failed
  bool answering_ = false;  // the proxy's own answer is out: close once it is sent
};

}  // namespace belljar
