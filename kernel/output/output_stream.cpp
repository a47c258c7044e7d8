#include "kernel/output/output_stream.hpp"

#include <algorithm>

namespace belljar {

uint64_t OutputBudget::take(uint64_t bytes) {
  uint64_t room = used_ >= limit_ ? 0 : limit_ - used_;
  uint64_t granted = std::min(room, bytes);
  used_ += granted;
  dropped_ += bytes - granted;
  return granted;
}

bool OutputBudget::take_whole(uint64_t bytes) {
  if (bytes > room()) {
    dropped_ += bytes;
    return false;
  }
  used_ += bytes;
  return true;
}

void StreamBuffer::append(std::string_view bytes, OutputBudget& budget) {
  uint64_t granted = budget.take(bytes.size());
  if (granted == 0) return;
  // Cut by the cap: end on a character boundary rather than half a UTF-8 sequence.
  if (granted < bytes.size()) granted = utf8_complete_prefix(bytes.substr(0, granted));
  if (text_.empty()) first_pending_ = Clock::now();
  text_.append(bytes.substr(0, granted));
  total_ += granted;
}

bool StreamBuffer::due(Clock::time_point now) const {
  return !text_.empty() && (text_.size() >= kFlushBytes || now >= deadline());
}

StreamBuffer::Clock::time_point StreamBuffer::deadline() const {
  return first_pending_ + (text_.size() > hold_back_ ? kFlushDelay : kHoldDelay);
}

size_t StreamBuffer::ready(bool final, Clock::time_point now) const {
  if (final) return text_.size();
  size_t keep = now < first_pending_ + kHoldDelay ? std::min(hold_back_, text_.size()) : 0;
  return utf8_complete_prefix(std::string_view(text_).substr(0, text_.size() - keep));
}

std::string StreamBuffer::take_prefix(size_t bytes, Clock::time_point now) {
  size_t n = std::min(bytes, text_.size());
  std::string out = text_.substr(0, n);
  text_.erase(0, n);
  if (!text_.empty() && n > 0) first_pending_ = now;
  return out;
}

size_t utf8_complete_prefix(std::string_view bytes) {
  size_t n = bytes.size();
  // Look back at most 3 bytes for the start of a multi-byte sequence.
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(bytes[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = (c & 0x80) == 0      ? 1
                  : (c & 0xE0) == 0xC0 ? 2
                  : (c & 0xF0) == 0xE0 ? 3
                  : (c & 0xF8) == 0xF0 ? 4
                                       : 1;
    return back < need ? n - back : n;
  }
  return n;
}

}  // namespace belljar
