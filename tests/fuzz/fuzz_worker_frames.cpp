// libFuzzer target: WorkerFrameDecoder on arbitrary bytes from an (untrusted) worker.
//
// Input: one byte choosing the feed size (1-256), then the stream. The stream is decoded twice,
// fed whole and fed in pieces; both must yield the same frames and the same fault. Every frame
// must dump, and re-encode to a frame that decodes to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/protocol/bounded_json.hpp"
#include "kernel/session/worker_frames.hpp"

using namespace belljar;

namespace {

constexpr uint32_t kCap = 1 << 20;

void check(bool ok) {
  if (!ok) std::abort();
}

struct Decoded {
  std::vector<nlohmann::json> frames;
  bool faulted = false;
};

Decoded decode(std::string_view stream, size_t piece) {
  WorkerFrameDecoder decoder(kCap);
  Decoded out;
  for (size_t at = 0; at < stream.size(); at += piece) {
    decoder.feed(stream.substr(at, piece));
    while (auto frame = decoder.next()) out.frames.push_back(std::move(*frame));
    if (!decoder.fault().empty()) break;
  }
  while (auto frame = decoder.next()) out.frames.push_back(std::move(*frame));
  out.faulted = !decoder.fault().empty();
  // The fault is sticky: nothing more comes out, whatever is fed.
  if (out.faulted) {
    decoder.feed(encode_worker_frame({{"type", "after-fault"}}));
    check(!decoder.next());
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1 << 20)) return 0;
  size_t piece = size_t{data[0]} + 1;
  std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);

  Decoded whole = decode(stream, stream.size() + 1);
  Decoded pieces = decode(stream, piece);
  check(whole.faulted == pieces.faulted);
  check(whole.frames == pieces.frames);

  for (auto& frame : whole.frames) {
    check(frame.is_object() && frame.contains("type") && frame["type"].is_string());
    std::string text = dump_json(frame);
    check(!text.empty());
    WorkerFrameDecoder again(kCap);
    again.feed(encode_worker_frame(frame));
    auto back = again.next();
    check(back.has_value() && *back == frame);
  }
  return 0;
}
