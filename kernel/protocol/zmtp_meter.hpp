#pragma once
// Reads the ZMTP 3.x byte stream a peer sends to one of the Jupyter channels, as the gate
// (zmtp_gate.hpp) passes it on, and says where it must stop.
// The threat: before any signature is checked, libzmq buffers each message whole (every part
// of a multipart message until the last) and allocates each part's declared size as soon as it
// reads the part's header. ZMQ_MAXMSGSIZE bounds one part only; a peer that sends a thousand
// 60 MiB parts, or holds an unfinished part open on each of many connections, would make the
// kernel buffer gigabytes. The meter knows each message's declared size from its frame
// headers, so the gate refuses the header that takes a message past the limit before libzmq
// ever sees it.
//
// Grammar (ZMTP 3.0/3.1, RFC 23 and 37): a 64-octet greeting (signature %xFF 8*OCTET %x7F,
// version major >= 3, mechanism NULL, as-server, filler), then frames: a flags octet (MORE 1,
// LONG 2, COMMAND 4; the rest reserved), a size (1 octet, or 8 big-endian when LONG), the body.
// A command never has MORE. Anything else is refused: older ZMTP, other mechanisms, reserved
// bits, oversize commands. The handshake (the greeting, then the READY command, which must be
// the first frame) is kept until it is whole, so the gate can read the peer's identity from it
// (the routing id a ROUTER socket knows the peer by) before passing it on.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace belljar {

struct ZmtpLimits {
  uint64_t max_message_bytes;              // one message, all its parts' bodies together
  uint64_t max_parts = 4096;               // parts of one message
  uint64_t max_command_bytes = 64 * 1024;  // READY's metadata, PING, SUBSCRIBE
};

class ZmtpMeter {
 public:
  explicit ZmtpMeter(ZmtpLimits limits) : limits_(limits) {}

  // Reads the next bytes of the stream. False when they break the grammar or a limit: nothing
  // of `bytes` may then be passed on, and why() says what (the stream is finished).
  bool feed(std::string_view bytes);
  const std::string& why() const { return why_; }
  // Declared bytes of the message under way (its parts' sizes, as their headers arrived): what
  // libzmq holds for this peer until the message ends. 0 between messages.
  uint64_t unfinished_bytes() const { return message_bytes_; }
  // Whether the greeting and the READY command are in; then the READY command's body, and the
  // stream offset just past it (bytes fed before the first message part).
  bool handshake_done() const { return handshake_end_ != 0; }
  const std::string& ready_body() const { return ready_; }
  uint64_t handshake_end() const { return handshake_end_; }
  // Messages whose last part is in.
  uint64_t messages() const { return messages_; }

 private:
  enum class State { greeting, flags, size, body };
  bool refuse(std::string why);
  bool check_greeting();
  bool frame_declared(uint64_t size);

  ZmtpLimits limits_;
  State state_ = State::greeting;
  std::string header_;  // the greeting, or a frame's flags and size, as far as it came
  uint8_t flags_ = 0;
  uint64_t body_left_ = 0;
  uint64_t message_bytes_ = 0;
  uint64_t message_parts_ = 0;
  uint64_t messages_ = 0;
  uint64_t fed_ = 0;            // bytes of the stream read so far
  uint64_t handshake_end_ = 0;  // 0 until READY is whole
  std::string ready_;
  std::string why_;
};

// A READY command's metadata (RFC 23: name-size octet, name, 4-octet value size, value), in its
// order; nullopt when the body is not a READY command or a property overruns it.
using ZmtpProperties = std::vector<std::pair<std::string, std::string>>;
std::optional<ZmtpProperties> read_ready(std::string_view body);
// A whole READY command frame (flags, size, body) carrying `properties`.
std::string ready_frame(const ZmtpProperties& properties);

}  // namespace belljar
