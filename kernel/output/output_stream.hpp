#pragma once
// What the worker writes on fd 1/2 for the running cell: coalesced into stream messages and
// capped per cell. Bytes are split only on UTF-8 character boundaries.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace belljar {

// The cap over everything one cell outputs: streams, displays, errors, the reply's
// user_expressions and payload, input prompts. Only the supervisor resets it (a new cell);
// the worker may only lower it (%%limits), never raise it or forget what was used.
class OutputBudget {
 public:
  void reset(uint64_t limit) { limit_ = limit, used_ = 0, dropped_ = 0; }
  void lower(uint64_t limit) { limit_ = limit < limit_ ? limit : limit_; }
  // How many of `bytes` may still be sent; the rest is counted as dropped.
  uint64_t take(uint64_t bytes);
  // For what can't be cut (a display bundle): all of it fits and is charged, or none of it
  // is sent and all of it counts as dropped.
  bool take_whole(uint64_t bytes);
  // For what is sent whatever the budget says (an error's name and the start of its message):
  // spent from it all the same, past its limit if need be, so a flood of them ends the sending
  // of what the budget does decide.
  void charge(uint64_t bytes) { used_ += bytes; }
  uint64_t room() const { return used_ >= limit_ ? 0 : limit_ - used_; }
  bool exhausted() const { return used_ >= limit_; }
  uint64_t used() const { return used_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t limit() const { return limit_; }

 private:
  uint64_t limit_ = 10ull << 20, used_ = 0, dropped_ = 0;
};

class StreamBuffer {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kFlushBytes = 64 * 1024;             // size window
  static constexpr std::chrono::milliseconds kFlushDelay{20};  // time window
  static constexpr std::chrono::milliseconds kHoldDelay{500};  // longest a tail is held

  // The last `bytes` of the stream wait for more (a secret to redact may straddle two
  // chunks), for kHoldDelay at most. A constant: whether the tail matches anything never
  // changes what is sent when.
  void set_hold_back(size_t bytes) { hold_back_ = bytes; }
  void append(std::string_view bytes, OutputBudget& budget);
  bool pending() const { return !text_.empty(); }
  // Due when the size window is full, the oldest pending byte beyond the held tail has waited
  // kFlushDelay, or the held tail alone has waited kHoldDelay.
  bool due(Clock::time_point now) const;
  Clock::time_point deadline() const;
  // How many bytes are ready to send (complete UTF-8 characters); `final` also sends the held
  // and partial tail.
  size_t ready(bool final, Clock::time_point now = Clock::now()) const;
  // The first `bytes` of the pending text (a cut from ready(), perhaps moved past a secret).
  std::string take_prefix(size_t bytes, Clock::time_point now = Clock::now());
  std::string take(bool final, Clock::time_point now = Clock::now()) {
    return take_prefix(ready(final, now), now);
  }
  std::string_view pending_text() const { return text_; }
  uint64_t total_bytes() const { return total_; }
  void reset_totals() { total_ = 0; }

 private:
  std::string text_;
  size_t hold_back_ = 0;
  Clock::time_point first_pending_{};
  uint64_t total_ = 0;
};

// Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence.
size_t utf8_complete_prefix(std::string_view bytes);

}  // namespace belljar
