#include "kernel/protocol/zmtp_meter.hpp"

#include <algorithm>

namespace belljar {

namespace {
constexpr size_t kGreeting = 64;
constexpr uint8_t kMore = 1, kLong = 2, kCommand = 4;

std::string mib(uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}
}  // namespace

bool ZmtpMeter::refuse(std::string why) {
  why_ = std::move(why);
  return false;
}

bool ZmtpMeter::check_greeting() {
  // The signature was checked as soon as it came (feed).
  auto octet = [&](size_t i) { return static_cast<uint8_t>(header_[i]); };
  if (octet(10) < 3) return refuse("ZMTP " + std::to_string(octet(10)) + ".x: only 3.x is served");
  std::string_view mechanism(header_.data() + 12, 20);
  if (mechanism != std::string_view("NULL\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 20))
    return refuse("a security mechanism other than NULL (Jupyter signs messages instead)");
  return true;
}

// A frame's header is complete: whether its body may follow.
bool ZmtpMeter::frame_declared(uint64_t size) {
  // NULL's handshake: the greeting, then READY, before anything else.
  if (handshake_end_ == 0 && !(flags_ & kCommand))
    return refuse("a message before the READY command");
  if (flags_ & kCommand) {
    if (size > limits_.max_command_bytes)
      return refuse("a ZMTP command of " + std::to_string(size) + " bytes");
    return true;
  }
  if (++message_parts_ > limits_.max_parts)
    return refuse("a message of more than " + std::to_string(limits_.max_parts) + " parts");
  if (size > limits_.max_message_bytes - message_bytes_)
    return refuse("a message over " + mib(limits_.max_message_bytes) + " (parts declared " +
                  mib(message_bytes_) + " and then " + mib(size) + ")");
  message_bytes_ += size;
  return true;
}

bool ZmtpMeter::feed(std::string_view bytes) {
  if (!why_.empty()) return false;
  const size_t before = bytes.size();
  while (!bytes.empty()) {
    switch (state_) {
      case State::greeting: {
        size_t take = std::min(bytes.size(), kGreeting - header_.size());
        header_.append(bytes.substr(0, take));
        bytes.remove_prefix(take);
        // The signature alone tells ZMTP 1.0 apart: refuse at once rather than wait for 64.
        if (header_.size() >= 10 && (static_cast<uint8_t>(header_[0]) != 0xFF ||
                                     (static_cast<uint8_t>(header_[9]) & 1) == 0))
          return refuse("not a ZMTP 3 greeting (ZMTP 1.0 or another protocol)");
        if (header_.size() < kGreeting) break;
        if (!check_greeting()) return false;
        header_.clear();
        state_ = State::flags;
        break;
      }
      case State::flags:
        flags_ = static_cast<uint8_t>(bytes.front());
        bytes.remove_prefix(1);
        if (flags_ & ~(kMore | kLong | kCommand))
          return refuse("a ZMTP frame with reserved flag bits set");
        if ((flags_ & kCommand) && (flags_ & kMore))
          return refuse("a ZMTP command marked as continued (MORE)");
        state_ = State::size;
        break;
      case State::size: {
        size_t width = (flags_ & kLong) ? 8 : 1;
        size_t take = std::min(bytes.size(), width - header_.size());
        header_.append(bytes.substr(0, take));
        bytes.remove_prefix(take);
        if (header_.size() < width) break;
        uint64_t size = 0;
        for (char c : header_) size = (size << 8) | static_cast<uint8_t>(c);
        header_.clear();
        if (!frame_declared(size)) return false;
        body_left_ = size;
        state_ = State::body;
        if (body_left_ > 0) break;
        [[fallthrough]];
      }
      case State::body: {
        uint64_t take = std::min<uint64_t>(bytes.size(), body_left_);
        if (handshake_end_ == 0) ready_.append(bytes.substr(0, take));  // within max_command_bytes
        bytes.remove_prefix(take);
        body_left_ -= take;
        if (body_left_ > 0) break;
        if (handshake_end_ == 0) {
          if (!read_ready(ready_)) return refuse("a first command that is not a READY command");
          handshake_end_ = fed_ + (before - bytes.size());
        }
        if (!(flags_ & (kMore | kCommand))) {  // the message's last part is in: libzmq lets go
          message_bytes_ = 0;
          message_parts_ = 0;
          ++messages_;
        }
        state_ = State::flags;
        break;
      }
    }
  }
  fed_ += before;
  return true;
}

std::optional<ZmtpProperties> read_ready(std::string_view body) {
  constexpr std::string_view kReady("\x05READY", 6);
  if (body.substr(0, kReady.size()) != kReady) return std::nullopt;
  body.remove_prefix(kReady.size());
  ZmtpProperties properties;
  while (!body.empty()) {
    size_t name_size = static_cast<uint8_t>(body[0]);
    if (name_size == 0 || body.size() < 1 + name_size + 4) return std::nullopt;
    std::string name(body.substr(1, name_size));
    body.remove_prefix(1 + name_size);
    uint64_t value_size = 0;
    for (int i = 0; i < 4; ++i) value_size = (value_size << 8) | static_cast<uint8_t>(body[i]);
    body.remove_prefix(4);
    if (value_size > body.size()) return std::nullopt;
    properties.emplace_back(std::move(name), std::string(body.substr(0, value_size)));
    body.remove_prefix(value_size);
  }
  return properties;
}

std::string ready_frame(const ZmtpProperties& properties) {
  std::string body("\x05READY", 6);
  for (const auto& [name, value] : properties) {
    body += static_cast<char>(name.size());
    body += name;
    for (int shift = 24; shift >= 0; shift -= 8)
      body += static_cast<char>((value.size() >> shift) & 0xff);
    body += value;
  }
  std::string frame(1, static_cast<char>(kCommand | (body.size() > 255 ? kLong : 0)));
  int width = body.size() > 255 ? 8 : 1;
  for (int shift = 8 * (width - 1); shift >= 0; shift -= 8)
    frame += static_cast<char>((body.size() >> shift) & 0xff);
  return frame + body;
}

}  // namespace belljar
