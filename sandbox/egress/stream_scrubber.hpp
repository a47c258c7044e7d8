#pragma once
// Replaces secret values in a byte stream that arrives in pieces: what a bound host sends back
// must never carry a value into the sandbox (an echo endpoint, an error page quoting the
// Authorization header, a redirect), even when the value is split across reads.
//
// The last (longest value - 1) bytes are held back until more arrive or the stream ends, so a
// value that straddles two pieces is whole when it is matched; everything before them is final.
// Values never hold a control character (bound_secrets.hpp refuses them), so nothing before the
// last newline is held either: a server-sent event goes out when its blank line arrives. What
// is held never depends on whether the text resembles a value (a prefix-matching hold would
// tell a sandbox that can make the host echo its guesses which guess starts the value).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace belljar {

class StreamScrubber {
 public:
  // Pairs of (value, replacement); every value non-empty.
  explicit StreamScrubber(std::vector<std::pair<std::string, std::string>> replacements);
  // What can go now, with every whole value replaced.
  std::string feed(std::string_view piece);
  // The rest, at the end of the stream.
  std::string finish();
  // A whole text at once (a head, a trailer).
  std::string scrub(std::string_view text) const;

 private:
  struct Match {
    size_t at = std::string_view::npos;
    const std::pair<std::string, std::string>* hit = nullptr;
  };
  Match next_match(std::string_view text, size_t from) const;
  std::vector<std::pair<std::string, std::string>> replacements_;  // longest value first
  static bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }
  size_t hold_ = 0;
  bool controls_end_values_ = true;  // no value holds a control character
  std::string pending_;
};

}  // namespace belljar
