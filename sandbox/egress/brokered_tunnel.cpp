#include "sandbox/egress/brokered_tunnel.hpp"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <cerrno>

#include "sandbox/egress/http_head.hpp"

namespace belljar {

namespace {

constexpr size_t kPiece = 16 * 1024;

void attach_bios(OpenSslPtr<SSL>& tls, BIO*& in, BIO*& out) {
  in = BIO_new(BIO_s_mem());
  out = BIO_new(BIO_s_mem());
  // An empty input is "try again", never end of file: the socket says when the peer is gone.
  BIO_set_mem_eof_return(in, -1);
  SSL_set_bio(tls.get(), in, out);
}

}  // namespace

BrokeredTunnel::BrokeredTunnel(OpenSslPtr<SSL> client_tls, OpenSslPtr<SSL> upstream_tls,
                               BrokeredHttp http, std::string_view client_hello)
    : http_(std::move(http)) {
  client_.tls = std::move(client_tls);
  upstream_.tls = std::move(upstream_tls);
  attach_bios(client_.tls, client_.in, client_.out);
  attach_bios(upstream_.tls, upstream_.in, upstream_.out);
  BIO_write(client_.in, client_hello.data(), static_cast<int>(client_hello.size()));
}

bool BrokeredTunnel::read_socket(Side& side, Endpoint end, TunnelStep& step) {
  bool moved = false;
  char buffer[kPiece];
  while (end.readable && !end.eof && BIO_ctrl_pending(side.in) < kQueueCap) {
    ssize_t n = ::recv(end.fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      BIO_write(side.in, buffer, static_cast<int>(n));
      moved = true;
    } else if (n == 0) {
      end.eof = true;
      moved = true;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      end.readable = false;
    } else if (errno != EINTR) {
      side.closed = true;
      break;
    }
  }
  step.moved = step.moved || moved;
  return moved;
}

bool BrokeredTunnel::send_socket(Side& side, Endpoint end, TunnelStep& step) {
  bool moved = false;
  for (;;) {
    if (side.sending.empty()) {
      char buffer[kPiece];
      int n = BIO_read(side.out, buffer, sizeof buffer);
      if (n <= 0) break;
      side.sending.assign(buffer, static_cast<size_t>(n));
    }
    if (!end.writable || side.closed) break;
    ssize_t n = ::send(end.fd, side.sending.data(), side.sending.size(), MSG_NOSIGNAL);
    if (n > 0) {
      side.sending.erase(0, static_cast<size_t>(n));
      moved = true;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      end.writable = false;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      side.closed = true;  // the peer is gone: nothing more can reach it
    }
  }
  step.moved = step.moved || moved;
  return moved;
}

void BrokeredTunnel::handshake(Side& side, bool upstream, TunnelStep& step) {
  ERR_clear_error();
  int r = SSL_do_handshake(side.tls.get());
  if (r == 1) {
    side.ready = true;
    step.moved = true;
    return;
  }
  int error = SSL_get_error(side.tls.get(), r);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return;
  std::string detail;
  long verify = SSL_get_verify_result(side.tls.get());
  if (upstream && verify != X509_V_OK)
    detail =
        std::string("its certificate did not verify: ") + X509_verify_cert_error_string(verify);
  else
    detail = openssl_error_text();
  if (upstream) {
    upstream_failed_ = "the TLS handshake with the upstream failed: " + detail;
  } else {
    step.failure =
        TunnelFailure{EgressFailure::secret_unsupported,
                      "the sandbox's TLS client did not complete the handshake with the proxy (" +
                          detail + "); does it use its own CA bundle instead of SSL_CERT_FILE?"};
    step.over = true;
  }
}

void BrokeredTunnel::read_plain(Side& side, std::string& into, size_t cap, TunnelStep& step) {
  char buffer[kPiece];
  while (into.size() < cap && !side.closed) {
    ERR_clear_error();
    int n = SSL_read(side.tls.get(), buffer, sizeof buffer);
    if (n > 0) {
      into.append(buffer, static_cast<size_t>(n));
      step.moved = true;
      continue;
    }
    int error = SSL_get_error(side.tls.get(), n);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) side.closed = true;
    break;
  }
}

void BrokeredTunnel::write_plain(Side& side, std::string& from, TunnelStep& step) {
  while (!from.empty() && BIO_ctrl_pending(side.out) < kQueueCap) {
    ERR_clear_error();
    int n = SSL_write(side.tls.get(), from.data(), static_cast<int>(std::min(from.size(), kPiece)));
    if (n <= 0) break;
    from.erase(0, static_cast<size_t>(n));
    step.moved = true;
  }
}

void BrokeredTunnel::answer(const BrokerRefusal& refusal, TunnelStep& step) {
  answer(refusal.status, refusal.reason_phrase, refusal.failure, std::string(refusal.why()), step);
}

void BrokeredTunnel::answer(int status, const char* phrase, EgressFailure failure,
                            const std::string& why, TunnelStep& step) {
  bool denied = verdict_of(failure) == EgressVerdict::denied;
  down_ready_ = proxy_response(
      status, phrase, "belljar: " + why + "\n",
      {{denied ? "X-Belljar-Denied" : "X-Belljar-Error", std::string(failure_name(failure))}});
  up_plain_.clear();
  up_ready_.clear();
  answering_ = true;
  step.failure = TunnelFailure{failure, why};
}

TunnelStep BrokeredTunnel::step(Endpoint client, Endpoint upstream) {
  TunnelStep step;
  for (int round = 0; round < 8 && !step.over; ++round) {
    bool was = step.moved;
    step.moved = false;
    read_socket(client_, client, step);
    read_socket(upstream_, upstream, step);
    if (!client_.ready) handshake(client_, false, step);
    if (!upstream_.ready && !upstream_failed_) handshake(upstream_, true, step);
    if (step.over) break;
    if (client_.ready && upstream_failed_ && !answering_)
      answer(502, "Bad Gateway", EgressFailure::upstream_certificate, *upstream_failed_, step);

    if (client_.ready && upstream_.ready && !answering_) {
      // Backpressure: what waits for upstream is capped, not only what waits to be parsed.
      bool hold = http_.client_paused() || up_ready_.size() >= kQueueCap;
      read_plain(client_, up_plain_, hold ? 0 : kQueueCap, step);
      if (auto refused = http_.from_client(up_plain_, up_ready_)) answer(*refused, step);
    }
    if (client_.ready && upstream_.ready && !answering_) {
      write_plain(upstream_, up_ready_, step);
      read_plain(upstream_, down_plain_, down_ready_.size() < kQueueCap ? kQueueCap : 0, step);
      bool upstream_done =
          upstream_.closed || (upstream.eof && BIO_ctrl_pending(upstream_.in) == 0);
      if (auto refused = http_.from_upstream(down_plain_, down_ready_, upstream_done)) {
        if (http_.mid_response()) {
          step.failure = TunnelFailure{refused->failure, std::string(refused->why())};
          answering_ = true;  // what is out goes; then the connection ends
        } else {
          answer(*refused, step);
        }
      }
      std::vector<BrokeredExchange> finished = http_.take_finished();
      if (!finished.empty()) {
        for (auto& exchange : finished) step.exchanges.push_back(std::move(exchange));
        // The record goes out before the end of its response does: a cell that has read its
        // response finds the request in its facts (the caller posts, then comes back).
        step.moved = true;
        return step;
      }
      if (upstream_done && !answering_) {
        if (http_.in_flight())
          answer(BrokerRefusal(BrokerReason::closed_without_answer), step);
        else
          answering_ = true;  // nothing more comes: close once the client has it all
      }
    }
    if (client_.ready) write_plain(client_, down_ready_, step);
    send_socket(client_, client, step);
    send_socket(upstream_, upstream, step);

    bool client_flushed = client_.sending.empty() && BIO_ctrl_pending(client_.out) == 0;
    if (client_.closed || (client.eof && BIO_ctrl_pending(client_.in) == 0 && !answering_)) {
      step.over = true;  // the sandbox's client left: nothing more is for it
    } else if ((answering_ || http_.closing()) && down_ready_.empty() && client_flushed) {
      SSL_shutdown(client_.tls.get());  // close_notify, best effort
      send_socket(client_, client, step);
      step.over = true;
    } else if (!upstream_.ready && !upstream_failed_ &&
               (upstream_.closed || (upstream.eof && BIO_ctrl_pending(upstream_.in) == 0))) {
      upstream_failed_ = "the upstream closed the connection during the TLS handshake";
      step.moved = true;
    }
    bool moved = step.moved;
    step.moved = was || moved;
    if (!moved) break;
  }
  return step;
}

}  // namespace belljar
