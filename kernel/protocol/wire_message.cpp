#include "kernel/protocol/wire_message.hpp"

#include <sys/random.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "kernel/protocol/bounded_json.hpp"

namespace belljar {

const char* describe(WireFault fault) {
  switch (fault) {
    case WireFault::none:
      return "ok";
    case WireFault::no_delimiter:
      return "no <IDS|MSG> delimiter";
    case WireFault::too_few_frames:
      return "fewer than the five frames after the delimiter";
    case WireFault::bad_signature:
      return "missing or wrong HMAC signature";
    case WireFault::replayed:
      return "replayed signature";
    case WireFault::bad_json:
      return "malformed JSON part";
    case WireFault::bad_header:
      return "header without msg_id, msg_type or session";
  }
  return "unknown";
}

WireFault parse_wire_message(const std::vector<std::string>& frames, const Signer& signer,
                             ReplayGuard& replay, WireMessage& out) {
  size_t delimiter = 0;
  while (delimiter < frames.size() && frames[delimiter] != kDelimiter) ++delimiter;
  if (delimiter == frames.size()) return WireFault::no_delimiter;
  if (frames.size() - delimiter < 6) return WireFault::too_few_frames;
  const std::string& signature = frames[delimiter + 1];
  const std::string* parts = &frames[delimiter + 2];
  if (!signer.verify(signature, {parts[0], parts[1], parts[2], parts[3]}))
    return WireFault::bad_signature;
  if (!replay.admit(signature)) return WireFault::replayed;

  nlohmann::json* targets[] = {&out.header, &out.parent_header, &out.metadata, &out.content};
  for (int i = 0; i < 4; ++i) {
    auto value = parse_bounded_json(parts[i], nullptr);
    if (!value || !value->is_object()) return WireFault::bad_json;
    *targets[i] = std::move(*value);
  }
  auto is_string = [&](const char* key) {
    auto it = out.header.find(key);
    return it != out.header.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
  };
  if (!is_string("msg_id") || !is_string("msg_type") || !is_string("session"))
    return WireFault::bad_header;
  out.identities.assign(frames.begin(), frames.begin() + static_cast<long>(delimiter));
  out.buffers.assign(frames.begin() + static_cast<long>(delimiter) + 6, frames.end());
  return WireFault::none;
}

std::vector<std::string> serialize_wire_message(const WireMessage& message, const Signer& signer) {
  std::vector<std::string> frames = message.identities;
  std::string parts[] = {dump_json(message.header), dump_json(message.parent_header),
                         dump_json(message.metadata), dump_json(message.content)};
  frames.emplace_back(kDelimiter);
  frames.push_back(signer.sign({parts[0], parts[1], parts[2], parts[3]}));
  for (auto& part : parts) frames.push_back(std::move(part));
  for (auto& buffer : message.buffers) frames.push_back(buffer);
  return frames;
}

std::string new_uuid() {
  unsigned char bytes[16];
  // getrandom: the kernel's CSPRNG, without starting OpenSSL's DRBG in this process.
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
    throw std::runtime_error("getrandom failed");
  bytes[6] = (bytes[6] & 0x0f) | 0x40;  // version 4
  bytes[8] = (bytes[8] & 0x3f) | 0x80;  // RFC 4122 variant
  char text[37];
  std::snprintf(text, sizeof text,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", bytes[0],
                bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]);
  return text;
}

std::string iso8601_now() {
  return iso8601(std::chrono::system_clock::now());
}

std::string iso8601(std::chrono::system_clock::time_point now) {
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];  // room for any year gmtime_r can give
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<long>(micros % 1000000));
  return text;
}

nlohmann::json make_header(const std::string& msg_type, const std::string& session) {
  return {{"msg_id", new_uuid()},  {"msg_type", msg_type},  {"session", session},
          {"username", "belljar"}, {"date", iso8601_now()}, {"version", kProtocolVersion}};
}

}  // namespace belljar
