#pragma once
// The kernel's own diagnostic lines on stderr (Jupyter keeps them in its log). Anything a peer
// can trigger goes through a rate limit so bad input can't flood the log.
#include <chrono>
#include <map>
#include <string>

namespace belljar {

void log_line(const std::string& text);

class RateLimitedLog {
 public:
  // Logs at most `burst` lines per category per minute, then one summary of what was dropped.
  explicit RateLimitedLog(int burst = 10) : burst_(burst) {}
  void log(const std::string& category, const std::string& text);

 private:
  struct Window {
    std::chrono::steady_clock::time_point start;
    int logged = 0;
    long suppressed = 0;
  };
  int burst_;
  std::map<std::string, Window> windows_;
};

}  // namespace belljar
