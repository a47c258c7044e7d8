#include "kernel/session/worker_frames.hpp"

#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/buffer_room.hpp"

namespace belljar {

std::string encode_worker_frame(const nlohmann::json& message) {
  std::string body = dump_json(message);
  uint32_t n = static_cast<uint32_t>(body.size());
  std::string frame;
  frame.reserve(4 + body.size());
  frame.push_back(static_cast<char>(n >> 24));
  frame.push_back(static_cast<char>(n >> 16));
  frame.push_back(static_cast<char>(n >> 8));
  frame.push_back(static_cast<char>(n));
  frame += body;
  return frame;
}

std::optional<nlohmann::json> WorkerFrameDecoder::next() {
  if (!fault_.empty()) return std::nullopt;
  if (buffered() < 4) return std::nullopt;
  auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
  uint32_t length = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  if (length > max_frame_) {
    fault_ = "frame of " + std::to_string(length) + " bytes exceeds the " +
             std::to_string(max_frame_) + "-byte cap";
    return std::nullopt;
  }
  if (buffered() - 4 < length) return std::nullopt;
  std::string_view body(buffer_.data() + offset_ + 4, length);
  std::string why;
  auto value = parse_bounded_json(body, &why);
  offset_ += 4 + length;
  // Compact once all is read or the consumed prefix dominates, so a long session doesn't grow
  // the buffer; the room one large frame needed is given back once it is read.
  if (offset_ == buffer_.size() || (offset_ > (1u << 16) && offset_ * 2 > buffer_.size())) {
    buffer_.erase(0, offset_);
    offset_ = 0;
    give_back_room(buffer_);
  }
  if (!value) {
    fault_ = "unparsable frame: " + why;
    return std::nullopt;
  }
  if (!value->is_object() || !value->contains("type") || !(*value)["type"].is_string()) {
    fault_ = "frame is not an object with a string \"type\"";
    return std::nullopt;
  }
  return value;
}

}  // namespace belljar
