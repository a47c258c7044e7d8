#pragma once
// An HTTP/1.1 chunked body, read incrementally: where it ends (so the next message on a
// keep-alive connection starts where both ends agree) and, when asked, its data.
//
// The threat is request smuggling and a peer that never stops: the grammar is strict (hex sizes
// of at most 15 digits, CRLF everywhere, no bare LF, extensions bounded), and a size line or
// the trailer section that grows past its cap is an error, never buffered without end.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sandbox/egress/http_head.hpp"

namespace belljar {

class ChunkedBody {
 public:
  // Reads from the front of `in`; appends the chunks' data to `data` when not null. Returns the
  // bytes consumed (framing included); stops at the end of the body (done()) or of `in`.
  // Throws HttpHeadError on malformed framing.
  size_t feed(std::string_view in, std::string* data);
  bool done() const { return state_ == State::done; }

 private:
  enum class State { size_line, data, data_end, trailer, done };
  State state_ = State::size_line;
  std::string line_;    // the size line or trailer line read so far
  uint64_t left_ = 0;   // of the current chunk's data
  size_t trailer_ = 0;  // bytes of trailer section read
};

}  // namespace belljar
