#include "sandbox/egress/stream_scrubber.hpp"

#include <algorithm>

namespace belljar {

StreamScrubber::StreamScrubber(std::vector<std::pair<std::string, std::string>> replacements)
    : replacements_(std::move(replacements)) {
  std::stable_sort(replacements_.begin(), replacements_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  if (!replacements_.empty()) hold_ = replacements_.front().first.size() - 1;
  for (const auto& r : replacements_)
    for (unsigned char c : r.first) controls_end_values_ = controls_end_values_ && !is_control(c);
}

// The earliest value at or after `from` (the longest when two start at one place).
StreamScrubber::Match StreamScrubber::next_match(std::string_view text, size_t from) const {
  Match best;
  for (const auto& r : replacements_) {
    size_t at = text.find(r.first, from);
    if (at < best.at) best = {at, &r};
  }
  return best;
}

std::string StreamScrubber::feed(std::string_view piece) {
  if (replacements_.empty()) return std::string(piece);
  pending_.append(piece);
  if (pending_.size() <= hold_) return {};
  // A value that starts before the cut is whole in pending_ (it is at most hold_ + 1 long), so
  // everything before the cut, and any value straddling it, is final.
  size_t cut = pending_.size() - hold_;
  // No value holds a control character, so none spans one: everything up to the last line end
  // is final too. That keeps an event stream (lines) flowing event by event, and the rule
  // depends on where the newlines are, never on the values: the timing of what is released
  // tells the sandbox nothing about them.
  if (controls_end_values_)
    for (size_t at = pending_.size(); at > cut; --at)
      if (is_control(static_cast<unsigned char>(pending_[at - 1]))) {
        cut = at;
        break;
      }
  std::string out;
  size_t from = 0;
  for (Match m; (m = next_match(pending_, from)).hit && m.at < cut;) {
    out.append(pending_, from, m.at - from);
    out.append(m.hit->second);
    from = m.at + m.hit->first.size();
  }
  size_t end = std::max(from, cut);
  out.append(pending_, from, end - from);
  pending_.erase(0, end);
  return out;
}

std::string StreamScrubber::finish() {
  std::string rest = scrub(pending_);
  pending_.clear();
  return rest;
}

std::string StreamScrubber::scrub(std::string_view text) const {
  std::string out;
  size_t from = 0;
  for (Match m; (m = next_match(text, from)).hit;) {
    out.append(text.substr(from, m.at - from));
    out.append(m.hit->second);
    from = m.at + m.hit->first.size();
  }
  out.append(text.substr(from));
  return out;
}

}  // namespace belljar
