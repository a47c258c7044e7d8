#pragma once
// A Jupyter message as it travels on the ZMQ sockets:
//   [routing ids...] "<IDS|MSG>" signature header parent_header metadata content [buffers...]
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernel/protocol/replay_guard.hpp"
#include "kernel/protocol/signer.hpp"

namespace belljar {

// The sockets a request can arrive on and be answered on (iopub and heartbeat carry none).
enum class Channel { shell, control, stdin_ };
const char* channel_name(Channel channel);

inline constexpr const char* kDelimiter = "<IDS|MSG>";
inline constexpr const char* kProtocolVersion = "5.3";

struct WireMessage {
  std::vector<std::string> identities;
  nlohmann::json header = nlohmann::json::object();
  nlohmann::json parent_header = nlohmann::json::object();
  nlohmann::json metadata = nlohmann::json::object();
  nlohmann::json content = nlohmann::json::object();
  std::vector<std::string> buffers;

  std::string type() const { return header.value("msg_type", ""); }
  std::string id() const { return header.value("msg_id", ""); }
};

// Why a message was refused; the reactor logs it (rate-limited) and sends no reply.
enum class WireFault {
  none,
  no_delimiter,
  too_few_frames,
  bad_signature,
  replayed,
  bad_json,
  bad_header
};
const char* describe(WireFault fault);

// Verifies the signature (then the replay guard) before any JSON is parsed.
WireFault parse_wire_message(const std::vector<std::string>& frames, const Signer& signer,
                             ReplayGuard& replay, WireMessage& out);

// Serialises and signs; the header must already be filled in.
std::vector<std::string> serialize_wire_message(const WireMessage& message, const Signer& signer);

// Builds a header for a message the kernel sends.
nlohmann::json make_header(const std::string& msg_type, const std::string& session);
std::string new_uuid();
std::string iso8601_now();
std::string iso8601(std::chrono::system_clock::time_point when);  // UTC, microseconds

}  // namespace belljar
