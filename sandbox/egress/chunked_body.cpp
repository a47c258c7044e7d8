#include "sandbox/egress/chunked_body.hpp"

#include <algorithm>
#include <cctype>

namespace belljar {

namespace {
constexpr size_t kMaxLine = 4096;          // a size line with its extensions
constexpr size_t kMaxTrailer = 64 * 1024;  // the whole trailer section
}  // namespace

size_t ChunkedBody::feed(std::string_view in, std::string* data) {
  size_t used = 0;
  while (used < in.size() && state_ != State::done) {
    std::string_view rest = in.substr(used);
    if (state_ == State::data) {
      size_t take = static_cast<size_t>(std::min<uint64_t>(left_, rest.size()));
      if (data) data->append(rest.substr(0, take));
      used += take;
      left_ -= take;
      if (left_ == 0) state_ = State::data_end;
      continue;
    }
    // A line: up to LF, which must follow a CR.
    auto lf = rest.find('\n');
    size_t take = lf == std::string_view::npos ? rest.size() : lf + 1;
    line_.append(rest.substr(0, take));
    used += take;
    if (state_ == State::trailer) trailer_ += take;
    if (line_.size() > kMaxLine || trailer_ > kMaxTrailer)
      throw HttpHeadError("a chunk size line or trailer too long");
    if (lf == std::string_view::npos) continue;
    if (line_.size() < 2 || line_[line_.size() - 2] != '\r')
      throw HttpHeadError("a bare LF in a chunked body");
    std::string_view line(line_.data(), line_.size() - 2);
    if (line.find('\r') != std::string_view::npos)
      throw HttpHeadError("a bare CR in a chunked body");
    switch (state_) {
      case State::size_line: {
        std::string_view size = line.substr(0, line.find(';'));
        while (!size.empty() && (size.back() == ' ' || size.back() == '\t')) size.remove_suffix(1);
        if (size.empty() || size.size() > 15 ||
            !std::all_of(size.begin(), size.end(),
                         [](unsigned char c) { return std::isxdigit(c); }))
          throw HttpHeadError("a malformed chunk size");
        left_ = std::stoull(std::string(size), nullptr, 16);
        state_ = left_ == 0 ? State::trailer : State::data;
        break;
      }
      case State::data_end:
        if (!line.empty()) throw HttpHeadError("chunk data longer than its size");
        state_ = State::size_line;
        break;
      case State::trailer:
        if (line.empty()) state_ = State::done;
        break;
      default:
        break;
    }
    line_.clear();
  }
  return used;
}

}  // namespace belljar
