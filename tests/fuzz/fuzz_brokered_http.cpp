// libFuzzer target: the secret broker's HTTP/1.1 rewriting (sandbox/egress/brokered_http.hpp)
// on arbitrary bytes from both sides: the sandbox's requests and an upstream's responses.
//
// Input: byte 0 is a piece size (1-256: the bytes arrive in reads of that size, the way a
// socket splits them); the rest is the client's stream, then 0xff 0xfe, then the upstream's.
// Properties: nothing throws; a secret's value never reaches the client (whatever upstream
// sends: echoes, value split across reads or chunks, malformed framing); and the verdict and
// the bytes each side gets do not depend on how the input was split (a split-read bug is where
// a value or a smuggled request slips through).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sandbox/egress/brokered_http.hpp"

using namespace belljar;

namespace {

const char* kValue = "sk-fuzz-value-0123456789";

const BoundSecrets& secrets() {
  static std::string entry = std::string("KEY=") + kValue;
  static const char* env[] = {entry.c_str(), nullptr};
  static std::shared_ptr<const BoundSecrets> loaded = [] {
    SecretBinding binding;
    binding.name = "KEY";
    binding.host.host = "api.example.com";
    binding.host.ports = {443};
    return BoundSecrets::load({binding}, env);
  }();
  return *loaded;
}

struct Outcome {
  std::string upstream, client;
  bool refused = false;
};

// The client's stream in pieces, then the upstream's, then the upstream closes.
Outcome run(std::string_view from_client, std::string_view from_upstream, size_t piece) {
  const BoundSecrets& all = secrets();
  BrokeredHttp http({&all.all().front()}, all, "api.example.com");
  Outcome o;
  std::string in;
  for (size_t at = 0; at < from_client.size() && !o.refused; at += piece) {
    in.append(from_client.substr(at, piece));
    o.refused = http.from_client(in, o.upstream).has_value();
  }
  in.clear();
  for (size_t at = 0; at < from_upstream.size() && !o.refused; at += piece) {
    in.append(from_upstream.substr(at, piece));
    o.refused = http.from_upstream(in, o.client, false).has_value();
  }
  if (!o.refused) o.refused = http.from_upstream(in, o.client, true).has_value();
  return o;
}

// The client's bytes with each re-framed body decoded: how a body is cut into chunks depends
// on the reads, what it says must not. Our own chunking must decode, or that is a bug too.
std::string unframed(const std::string& client, bool& malformed) {
  std::string out;
  std::string_view rest(client);
  while (!rest.empty()) {
    auto end = rest.find("\r\n\r\n");
    if (end == std::string_view::npos) {
      out.append(rest);  // a refusal's body, or a head cut short by the upstream's end
      break;
    }
    std::string_view head = rest.substr(0, end + 4);
    out.append(head);
    rest.remove_prefix(head.size());
    if (head.find("\r\nTransfer-Encoding: chunked\r\n") == std::string_view::npos) continue;
    ChunkedBody body;
    try {
      rest.remove_prefix(body.feed(rest, &out));
    } catch (const HttpHeadError&) {
      malformed = true;
      return out;
    }
    if (!body.done()) break;  // the rest of the body never came
  }
  return out;
}

// Says what broke, with what each side got, before the crash report.
[[noreturn]] void fail(const char* what, const Outcome& o) {
  std::fprintf(stderr, "fuzz_brokered_http: %s\n--- upstream got:\n%s\n--- client got:\n%s\n", what,
               o.upstream.c_str(), o.client.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  size_t piece = 1 + data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  size_t cut = rest.find("\xff\xfe");
  std::string_view client = rest.substr(0, cut);
  std::string_view upstream = cut == std::string_view::npos ? "" : rest.substr(cut + 2);

  Outcome split = run(client, upstream, piece);
  if (split.client.find(kValue) != std::string::npos) fail("a value reached the client", split);
  Outcome whole = run(client, upstream, client.size() + upstream.size() + 1);
  if (whole.client.find(kValue) != std::string::npos) fail("a value reached the client", whole);
  // The same bytes in other pieces: the same verdict and, unless refused midway, the same
  // bytes out on both sides.
  if (split.refused != whole.refused) fail("split and whole differ in verdict", split);
  bool malformed = false;
  std::string split_client = unframed(split.client, malformed);
  std::string whole_client = unframed(whole.client, malformed);
  if (malformed) fail("the proxy's own chunked framing does not decode", split);
  if (!split.refused && (split.upstream != whole.upstream || split_client != whole_client))
    fail("split and whole differ in bytes", split);
  return 0;
}
