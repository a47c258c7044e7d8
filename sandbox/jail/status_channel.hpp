#pragma once
// The jail's reports travel as JSON lines: init -> warden over a pipe, warden -> supervisor
// over the control socket. Each message is one write() well under PIPE_BUF, so it is atomic.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace belljar {

// Writes one message; errors are ignored (the reader is gone, and so is the point).
void send_status(int fd, const nlohmann::json& message) noexcept;

// Splits what arrives on a non-blocking or blocking descriptor into messages.
class StatusReader {
 public:
  explicit StatusReader(int fd) : fd_(fd) {}
  // One read() (call it when poll says readable); returns whether the writer has closed.
  bool fill();
  // The next complete message, if any. A line that is not JSON becomes {"event":"garbled"}.
  std::optional<nlohmann::json> next();
  bool closed() const { return closed_; }

 private:
  int fd_;
  std::string buffer_;
  bool closed_ = false;
};

}  // namespace belljar
