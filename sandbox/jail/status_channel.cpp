#include "sandbox/jail/status_channel.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace belljar {

void send_status(int fd, const nlohmann::json& message) noexcept {
  try {
    std::string line =
        message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    size_t done = 0;
    while (done < line.size()) {
      // MSG_NOSIGNAL on sockets: a gone reader must not SIGPIPE the jail's processes.
      ssize_t n = ::send(fd, line.data() + done, line.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == ENOTSOCK) n = ::write(fd, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  } catch (...) {
  }
}

bool StatusReader::fill() {
  char chunk[4096];
  for (;;) {
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n > 0) {
      // A jail that floods its status channel is broken; keep the buffer bounded.
      if (buffer_.size() < (1u << 20)) buffer_.append(chunk, static_cast<size_t>(n));
    } else if (n == 0) {
      closed_ = true;
    } else if (errno == EINTR) {
      continue;
    }
    return closed_;
  }
}

std::optional<nlohmann::json> StatusReader::next() {
  size_t end = buffer_.find('\n');
  if (end == std::string::npos) return std::nullopt;
  std::string line = buffer_.substr(0, end);
  buffer_.erase(0, end + 1);
  auto message = nlohmann::json::parse(line, nullptr, false);
  if (message.is_discarded() || !message.is_object()) return nlohmann::json{{"event", "garbled"}};
  return message;
}

}  // namespace belljar
