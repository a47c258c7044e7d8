// libFuzzer target: parse_wire_message on arbitrary frames.
//
// Input: one mode byte, then frames separated by 0xFF (a byte valid UTF-8, hence valid JSON,
// never contains). Mode bit 0 clear: the frames are parsed as they are (a real signature is
// out of reach, so this exercises framing and signature checks). Mode bit 0 set: the frames
// are ids... then the four JSON parts then buffers, and the harness adds the delimiter and a
// valid signature, so the JSON parsing and header checks behind the HMAC are reached.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/protocol/wire_message.hpp"

using namespace belljar;

namespace {

constexpr char kSeparator = '\xff';

std::vector<std::string> split(std::string_view data) {
  std::vector<std::string> frames;
  size_t start = 0;
  while (true) {
    size_t at = data.find(kSeparator, start);
    if (at == std::string_view::npos) {
      frames.emplace_back(data.substr(start));
      return frames;
    }
    frames.emplace_back(data.substr(start, at - start));
    start = at + 1;
  }
}

const Signer& signer() {
  static const Signer instance("belljar-fuzz-key");
  return instance;
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1 << 20)) return 0;
  const uint8_t mode = data[0];
  std::vector<std::string> frames = split({reinterpret_cast<const char*>(data) + 1, size - 1});

  bool harness_signed = false;
  if (mode & 1) {
    // ids (0-3 of them), four parts (padded with "{}"), then the rest as buffers; signed.
    size_t ids = std::min<size_t>((mode >> 1) & 3, frames.size());
    std::vector<std::string> rebuilt(frames.begin(), frames.begin() + static_cast<long>(ids));
    std::vector<std::string> parts(
        frames.begin() + static_cast<long>(ids),
        frames.begin() + static_cast<long>(std::min(frames.size(), ids + 4)));
    while (parts.size() < 4) parts.emplace_back("{}");
    rebuilt.emplace_back(kDelimiter);
    rebuilt.push_back(signer().sign({parts[0], parts[1], parts[2], parts[3]}));
    for (auto& part : parts) rebuilt.push_back(part);
    for (size_t i = ids + 4; i < frames.size(); ++i) rebuilt.push_back(frames[i]);
    frames = std::move(rebuilt);
    // An id spelled like the delimiter ends the ids early (as in jupyter_client); then the
    // harness's signature is not where the parser looks.
    harness_signed = std::find(frames.begin(), frames.begin() + static_cast<long>(ids),
                               kDelimiter) == frames.begin() + static_cast<long>(ids);
  }

  ReplayGuard replay(8);
  WireMessage message;
  WireFault fault = parse_wire_message(frames, signer(), replay, message);
  check(describe(fault) != nullptr);
  if (harness_signed) check(fault != WireFault::bad_signature && fault != WireFault::no_delimiter);

  // Whatever got past the signature is remembered: the same frames again are a replay.
  if (fault != WireFault::no_delimiter && fault != WireFault::too_few_frames &&
      fault != WireFault::bad_signature) {
    WireMessage again;
    check(parse_wire_message(frames, signer(), replay, again) == WireFault::replayed);
  }

  if (fault == WireFault::none) {
    // What was accepted serialises, and parses back to the same message.
    (void)message.type();
    (void)message.id();
    std::vector<std::string> out = serialize_wire_message(message, signer());
    ReplayGuard fresh(8);
    WireMessage back;
    check(parse_wire_message(out, signer(), fresh, back) == WireFault::none);
    check(back.identities == message.identities);
    check(back.header == message.header);
    check(back.parent_header == message.parent_header);
    check(back.metadata == message.metadata);
    check(back.content == message.content);
    check(back.buffers == message.buffers);
  }
  return 0;
}
