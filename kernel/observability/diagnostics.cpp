#include "kernel/observability/diagnostics.hpp"

#include <unistd.h>

namespace belljar {

void log_line(const std::string& text) {
  std::string line = "[belljar] " + text + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void RateLimitedLog::log(const std::string& category, const std::string& text) {
  auto now = std::chrono::steady_clock::now();
  auto& window = windows_[category];
  if (now - window.start > std::chrono::minutes(1)) {
    if (window.suppressed > 0)
      log_line(category + ": " + std::to_string(window.suppressed) + " more not logged");
    window = Window{now, 0, 0};
  }
  if (window.logged < burst_) {
    ++window.logged;
    log_line(category + ": " + text);
  } else {
    ++window.suppressed;
  }
}

}  // namespace belljar
