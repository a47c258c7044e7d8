#include "kernel/mcp/json_lines.hpp"

#include "kernel/protocol/buffer_room.hpp"

namespace belljar {

bool JsonLines::feed(std::string_view chunk, const std::function<void(std::string_view)>& line) {
  size_t scan_from = inbox_.size();
  inbox_.append(chunk);
  size_t line_start = 0;
  for (size_t nl = inbox_.find('\n', scan_from); nl != std::string::npos;
       nl = inbox_.find('\n', nl + 1)) {
    if (discarding_)
      discarding_ = false;  // the end of the oversized line
    else
      line(std::string_view(inbox_).substr(line_start, nl - line_start));
    line_start = nl + 1;
  }
  inbox_.erase(0, line_start);
  if (discarding_) {
    inbox_.clear();
  } else if (inbox_.size() > max_line_) {
    inbox_.clear();
    discarding_ = true;
    return true;
  }
  give_back_room(inbox_);  // a write_file call's megabytes are not kept for the session
  return false;
}

std::string JsonLines::finish() {
  std::string last = discarding_ ? std::string() : std::move(inbox_);
  inbox_.clear();
  discarding_ = false;
  return last;
}

}  // namespace belljar
