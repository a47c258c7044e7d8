#pragma once
// The router's one client on stdin and stdout: JSON-RPC as lines (MCP's stdio transport). Its
// input ending closes every session's input (each finishes what it was asked, as the
// single-session server always did); a client that stops reading is the same. Writes never
// block: a client slow to read must not stop the router from reading its sessions.
#include <string>
#include <vector>

#include "kernel/mcp/json_lines.hpp"
#include "kernel/mcp_router/client_side.hpp"

namespace belljar {

class StdioClient : public ClientSide {
 public:
  StdioClient();
  ~StdioClient() override;  // stdout's flags as they were
  StdioClient(const StdioClient&) = delete;
  StdioClient& operator=(const StdioClient&) = delete;

  void open(SessionRouter& router) override;
  void add_poll_items(std::vector<pollfd>& items) override;
  void handle(const std::vector<pollfd>& items, size_t first, SessionRouter& router,
              SessionRouter::Clock::time_point now) override;
  void deliver(const Caller& caller, std::string line) override;
  void flush(SessionRouter& router) override;
  void call_dropped(const Caller&) override {}  // stdio's answers are lines: nothing waits
  void client_ended(SessionRouter::ClientKey) override {}
  bool has_output() const override { return !outbox_.empty() && !output_broken_; }
  bool backlogged() const override { return outbox_.size() > kMaxUnreadOutput; }
  void stop() override { input_open_ = false; }

 private:
  void read(SessionRouter& router, SessionRouter::Clock::time_point now);
  void write(SessionRouter& router);

  JsonLines lines_;
  int out_flags_ = -1;
  bool input_open_ = true, output_broken_ = false;
  std::string outbox_;
  size_t input_item_ = 0, output_item_ = 0, items_ = 0;  // what add_poll_items added
};

}  // namespace belljar
