#include "kernel/session/idle_output.hpp"

#include "sandbox/policy/quantities.hpp"

namespace belljar {

void IdleOutput::refill(Clock::time_point now, uint64_t limit) {
  if (filled_ && now - *filled_ < kWindow) return;
  budget_.reset(limit);
  filled_ = now;
  messages_ = 0;
  first_withheld_.clear();
  told_ = false;
}

OutputBudget& IdleOutput::budget(Clock::time_point now, uint64_t limit) {
  refill(now, limit);
  return budget_;
}

bool IdleOutput::admit_message(Clock::time_point now, uint64_t limit) {
  refill(now, limit);
  if (messages_ < kMessagesPerWindow) {
    ++messages_;
    return true;
  }
  withhold("more than " + std::to_string(kMessagesPerWindow) + " messages a minute");
  return false;
}

void IdleOutput::withhold(const std::string& why) {
  if (first_withheld_.empty()) first_withheld_ = why;
}

std::optional<std::string> IdleOutput::take_notice() {
  if (told_ || (first_withheld_.empty() && budget_.dropped() == 0)) return std::nullopt;
  told_ = true;
  std::string why = !first_withheld_.empty()
                        ? first_withheld_
                        : "past the output limit of " + format_size(budget_.limit()) +
                              " a minute (--output-limit)";
  return "[belljar] output of code running between cells was withheld (the first: " + why +
         "); more may be until the minute is over, and widgets may be out of step";
}

}  // namespace belljar
