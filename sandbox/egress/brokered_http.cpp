#include "sandbox/egress/brokered_http.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "sandbox/egress/http_head.hpp"
#include "sandbox/os/ascii.hpp"

namespace belljar {

static_assert(BrokeredHttp::kMaxHead == 64 * 1024, "broker_refusal.cpp spells the limit");

namespace {

bool has_token(std::string_view list, std::string_view token) {
  std::string text = ascii_lower(list);
  size_t from = 0;
  while (from <= text.size()) {
    size_t comma = text.find(',', from);
    std::string_view item = std::string_view(text).substr(from, comma - from);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item == token) return true;
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return false;
}

// Replaces every `from` in `text` by `to`; true if there was one.
bool replace_every(std::string& text, const std::string& from, const std::string& to) {
  bool any = false;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    any = true;
  }
  return any;
}

void append_chunk(std::string& out, std::string_view data) {
  if (data.empty()) return;  // an empty chunk would end the body
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  out += size;
  out.append(data);
  out += "\r\n";
}

// Headers that describe upstream's bytes as they were, before the scrubber changed them: a length
// or a range would give away a value's length (an echo's, on a HEAD), a digest would let the
// sandbox test guesses. The body is re-framed as chunked; a bodiless response needs none.
bool measures_upstream_bytes(std::string_view lowered_name) {
  for (std::string_view name : {"content-length", "content-range", "content-md5", "digest",
                                "content-digest", "repr-digest"})
    if (lowered_name == name) return true;
  return false;
}

}  // namespace

BrokeredHttp::BrokeredHttp(std::vector<const BoundSecret*> bound, const BoundSecrets& all,
                           std::string host_header)
    : bound_(std::move(bound)), host_header_(std::move(host_header)) {
  for (const auto* secret : bound_) names_.push_back(secret->name);
  for (const auto& secret : all.all())
    value_to_placeholder_.emplace_back(secret.value, secret.placeholder);
}

std::vector<BrokeredExchange> BrokeredHttp::take_finished() {
  std::vector<BrokeredExchange> taken;
  taken.swap(finished_);
  return taken;
}

// ---- requests: the sandbox's, put right for upstream --------------------------------------

std::optional<BrokerRefusal> BrokeredHttp::from_client(std::string& in, std::string& out) {
  while (!in.empty()) {
    if (request_body_ == Body::length) {
      size_t take = static_cast<size_t>(std::min<uint64_t>(request_left_, in.size()));
      out.append(in, 0, take);
      in.erase(0, take);
      request_left_ -= take;
      if (request_left_ == 0) request_body_ = Body::none;
      continue;
    }
    if (request_body_ == Body::chunked) {
      size_t used;
      try {
        used = request_chunks_.feed(in, nullptr);
      } catch (const HttpHeadError& e) {
        return BrokerRefusal(BrokerReason::malformed_request_body);
      }
      out.append(in, 0, used);
      in.erase(0, used);
      if (request_chunks_.done()) request_body_ = Body::none;
      continue;
    }
    if (client_paused() || closing_) return std::nullopt;  // the rest waits (or is never sent)
    auto end = find_head_end(in);
    if (!end) {
      if (in.size() > kMaxHead) return BrokerRefusal(BrokerReason::request_head_too_large);
      return std::nullopt;
    }
    if (auto refused = start_request(in, *end, out)) return refused;
  }
  return std::nullopt;
}

std::optional<BrokerRefusal> BrokeredHttp::start_request(std::string& in, size_t head_length,
                                                         std::string& out) {
  RequestHead head;
  try {
    head = parse_origin_request_head(std::string_view(in).substr(0, head_length));
  } catch (const HttpHeadError&) {
    return BrokerRefusal(BrokerReason::malformed_request);
  }
  if (head.version != "HTTP/1.1") return BrokerRefusal(BrokerReason::not_http11);
  for (const auto& h : head.headers) {
    std::string name = ascii_lower(h.name);
    if (name == "upgrade") return BrokerRefusal(BrokerReason::upgrade);
    if (name == "range" || name == "if-range") return BrokerRefusal(BrokerReason::range_request);
  }
  in.erase(0, head_length);

  bool injected = false;
  auto inject = [&](std::string text) {
    for (const auto* secret : bound_)
      injected = replace_every(text, secret->placeholder, secret->value) || injected;
    return text;
  };
  // Not the target: a host stores and shows targets (resource names, searches, logs others
  // read), so a value put there could be published by the host itself. Headers carry keys.
  std::string rewritten = head.method + " " + head.path + " HTTP/1.1\r\n";
  rewritten += "Host: " + host_header_ + "\r\n";
  for (const auto& h : head.headers) {
    std::string name = ascii_lower(h.name);
    // The host is the tunnel's; the encoding is one the proxy can read back; Proxy-* were for
    // the proxy, never for upstream.
    if (name == "host" || name == "accept-encoding" || name.rfind("proxy-", 0) == 0) continue;
    if (name == "connection" && has_token(h.value, "close")) closing_ = true;
    rewritten += h.name + ": " + inject(h.value) + "\r\n";
  }
  rewritten += "Accept-Encoding: identity\r\n\r\n";
  out += rewritten;

  exchanges_.push_back({head.method, injected, Clock::now()});
  if (head.chunked) {
    request_body_ = Body::chunked;
    request_chunks_ = ChunkedBody();
  } else if (head.content_length.value_or(0) > 0) {
    request_body_ = Body::length;
    request_left_ = *head.content_length;
  }
  return std::nullopt;
}

// ---- responses: upstream's, with no value left in them ------------------------------------

std::optional<BrokerRefusal> BrokeredHttp::from_upstream(std::string& in, std::string& out,
                                                         bool upstream_done) {
  for (;;) {
    if (!in_response_) {
      if (in.empty()) return std::nullopt;
      auto end = find_head_end(in);
      if (!end) {
        if (upstream_done) return BrokerRefusal(BrokerReason::closed_in_head);
        if (in.size() > kMaxHead) return BrokerRefusal(BrokerReason::response_head_too_large);
        return std::nullopt;
      }
      if (auto refused = start_response(in, *end, out)) return refused;
      continue;
    }
    switch (response_body_) {
      case Body::none:
        finish_response(out);
        continue;
      case Body::length: {
        size_t take = static_cast<size_t>(std::min<uint64_t>(response_left_, in.size()));
        body_data(std::string_view(in).substr(0, take), out);
        in.erase(0, take);
        response_left_ -= take;
        if (response_left_ == 0) {
          finish_response(out);
          continue;
        }
        break;
      }
      case Body::chunked: {
        std::string data;
        size_t used;
        try {
          used = response_chunks_.feed(in, &data);
        } catch (const HttpHeadError&) {
          // Part of the response may be out already: the connection just ends.
          closing_ = true;
          return BrokerRefusal(BrokerReason::malformed_chunked_response);
        }
        in.erase(0, used);
        body_data(data, out);
        if (response_chunks_.done()) {
          finish_response(out);
          continue;
        }
        break;
      }
      case Body::until_close:
        body_data(in, out);
        in.clear();
        if (upstream_done) {
          finish_response(out);
          continue;
        }
        break;
    }
    if (upstream_done && in_response_) return BrokerRefusal(BrokerReason::closed_in_body);
    return std::nullopt;
  }
}

std::optional<BrokerRefusal> BrokeredHttp::start_response(std::string& in, size_t head_length,
                                                          std::string& out) {
  ResponseHead head;
  try {
    head = parse_response_head(std::string_view(in).substr(0, head_length));
  } catch (const HttpHeadError&) {
    return BrokerRefusal(BrokerReason::malformed_response);
  }
  if (exchanges_.empty()) return BrokerRefusal(BrokerReason::unasked_response);
  if (head.status == 101) return BrokerRefusal(BrokerReason::protocol_switch);
  in.erase(0, head_length);
  StreamScrubber scrub(value_to_placeholder_);
  bool interim = head.status < 200;
  const Exchange& exchange = exchanges_.front();

  Body body = Body::until_close;
  std::string content_type, coding;
  bool close_asked = false, keep_alive_asked = false;
  for (const auto& h : head.headers) {
    std::string name = ascii_lower(h.name);
    if (name == "transfer-encoding") {
      if (ascii_lower(h.value) != "chunked") return BrokerRefusal(BrokerReason::transfer_coding);
      body = Body::chunked;
    } else if (name == "content-length" && body != Body::chunked) {
      if (h.value.empty() || h.value.size() > 18 ||
          !std::all_of(h.value.begin(), h.value.end(), ::isdigit))
        return BrokerRefusal(BrokerReason::malformed_content_length);
      body = Body::length;
      response_left_ = std::stoull(h.value);
    } else if (name == "content-encoding") {
      coding = ascii_lower(h.value);
    } else if (name == "content-type") {
      content_type = h.value;
    } else if (name == "connection") {
      close_asked = close_asked || has_token(h.value, "close");
      keep_alive_asked = keep_alive_asked || has_token(h.value, "keep-alive");
    }
  }
  bool upstream_closes = close_asked || (head.version == "HTTP/1.0" && !keep_alive_asked);
  bool bodiless = interim || exchange.method == "HEAD" || head.status == 204 || head.status == 304;
  if (bodiless || (body == Body::length && response_left_ == 0)) body = Body::none;
  if (body != Body::none && !coding.empty() && coding != "identity")
    return BrokerRefusal(BrokerReason::compressed_body);

  std::string rewritten = "HTTP/1.1 " + std::to_string(head.status) + " " + head.reason + "\r\n";
  for (const auto& h : head.headers) {
    std::string name = ascii_lower(h.name);
    if (name == "trailer" || name == "transfer-encoding") continue;
    if (measures_upstream_bytes(name)) continue;
    if (name == "connection" && upstream_closes) continue;
    rewritten += h.name + ": " + h.value + "\r\n";
  }
  if (body == Body::until_close) upstream_closes = true;
  if (!interim && upstream_closes) rewritten += "Connection: close\r\n";
  if (body != Body::none) rewritten += "Transfer-Encoding: chunked\r\n";
  // An empty body still needs its framing; ours, not upstream's (which was dropped above).
  if (body == Body::none && !bodiless) rewritten += "Content-Length: 0\r\n";
  rewritten += "\r\n";
  // The whole head, names included: a value holds no control character and its placeholder
  // only [A-Za-z0-9_-], so the lines stay what they were.
  out += scrub.scrub(rewritten);
  if (interim) return std::nullopt;  // 100 Continue and the like: the final head follows

  closing_ = closing_ || upstream_closes;
  in_response_ = true;
  response_body_ = body;
  status_ = head.status;
  scrubber_.emplace(std::move(scrub));
  usage_.emplace(content_type);
  if (body == Body::chunked) response_chunks_ = ChunkedBody();
  return std::nullopt;
}

void BrokeredHttp::body_data(std::string_view data, std::string& out) {
  if (data.empty()) return;
  usage_->feed(data);
  append_chunk(out, scrubber_->feed(data));
}

void BrokeredHttp::finish_response(std::string& out) {
  if (response_body_ != Body::none) {
    append_chunk(out, scrubber_->finish());
    out += "0\r\n\r\n";
  }
  Exchange exchange = exchanges_.front();
  exchanges_.pop_front();
  SecretUse use;
  use.secrets = names_;
  use.injected = exchange.injected;
  use.status = status_;
  use.latency_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - exchange.started).count();
  TokenUsage tokens = usage_->finish();
  use.input_tokens = tokens.input;
  use.output_tokens = tokens.output;
  finished_.push_back({exchange.method, std::move(use)});
  in_response_ = false;
  response_body_ = Body::none;
  scrubber_.reset();
  usage_.reset();
}

}  // namespace belljar
