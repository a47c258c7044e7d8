#pragma once
// Frames between the supervisor and the worker: 4-byte big-endian length + UTF-8 JSON object.
// The worker is untrusted: a frame that is oversized or unparsable is a fault, never a crash.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace belljar {

inline constexpr uint32_t kMaxWorkerFrame = 64u << 20;

std::string encode_worker_frame(const nlohmann::json& message);

class WorkerFrameDecoder {
 public:
  explicit WorkerFrameDecoder(uint32_t max_frame = kMaxWorkerFrame) : max_frame_(max_frame) {}

  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete frame, if any. Sets fault() and returns nullopt on a bad frame; after a
  // fault the decoder stays broken (the worker is restarted).
  std::optional<nlohmann::json> next();
  const std::string& fault() const { return fault_; }
  // Bytes a frame still needs before next() can return it (for bounded reads).
  size_t buffered() const { return buffer_.size() - offset_; }
  // Bytes the buffer holds room for: no more than kKeptRoom once large frames are read.
  size_t room() const { return buffer_.capacity(); }

 private:
  uint32_t max_frame_;
  std::string buffer_;
  size_t offset_ = 0;
  std::string fault_;
};

}  // namespace belljar
