#pragma once
// Lines of JSON-RPC as they arrive on a pipe, in chunks: each whole line handed on once, a line
// longer than the bound dropped to its end (said once, so the sender can be told), the last
// line without its newline handed on when the input ends. The MCP server's stdin, and the
// router's stdin and sessions' output (kernel/mcp_router).
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace belljar {

// One JSON-RPC message from a client (write_file's base64 fits).
inline constexpr size_t kMaxMcpLine = 64u << 20;
// Queued for a client that does not read: past this much, a server stops making more (the
// single-session server starts no next call; the router leaves its sessions' output in their
// pipes). At least one whole answer is always queued, however large.
inline constexpr size_t kMaxUnreadOutput = 16u << 20;

class JsonLines {
 public:
  explicit JsonLines(size_t max_line) : max_line_(max_line) {}
  // `line` gets each whole line in `chunk` and before it; true when a line passed the bound
  // (it is dropped up to its newline).
  bool feed(std::string_view chunk, const std::function<void(std::string_view)>& line);
  // The input ended: the line it left without a newline, if any (empty: none).
  std::string finish();
  size_t max_line() const { return max_line_; }

 private:
  size_t max_line_;
  std::string inbox_;
  bool discarding_ = false;
};

}  // namespace belljar
