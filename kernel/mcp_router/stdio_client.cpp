#include "kernel/mcp_router/stdio_client.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "kernel/protocol/buffer_room.hpp"

namespace belljar {

StdioClient::StdioClient() : lines_(kMaxMcpLine) {
  out_flags_ = ::fcntl(STDOUT_FILENO, F_GETFL);
  if (out_flags_ != -1) ::fcntl(STDOUT_FILENO, F_SETFL, out_flags_ | O_NONBLOCK);
}

StdioClient::~StdioClient() {
  if (out_flags_ != -1) ::fcntl(STDOUT_FILENO, F_SETFL, out_flags_);
}

void StdioClient::open(SessionRouter& router) {
  router.start(SessionRouter::Clock::now());
}

void StdioClient::add_poll_items(std::vector<pollfd>& items) {
  size_t first = items.size();
  input_item_ = output_item_ = SIZE_MAX;
  if (input_open_) {
    input_item_ = items.size() - first;
    items.push_back({STDIN_FILENO, POLLIN, 0});
  }
  if (has_output()) {
    output_item_ = items.size() - first;
    items.push_back({STDOUT_FILENO, POLLOUT, 0});
  }
  items_ = items.size() - first;
}

void StdioClient::handle(const std::vector<pollfd>& items, size_t first, SessionRouter& router,
                         SessionRouter::Clock::time_point now) {
  if (input_item_ < items_ && input_open_ && items[first + input_item_].revents) read(router, now);
  if (output_item_ < items_ && items[first + output_item_].revents) write(router);
}

void StdioClient::read(SessionRouter& router, SessionRouter::Clock::time_point now) {
  const Caller caller{SessionRouter::kFirstClient, 0};
  std::string chunk(1u << 20, '\0');
  ssize_t n = ::read(STDIN_FILENO, chunk.data(), chunk.size());
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    input_open_ = false;
    std::string last = lines_.finish();
    if (!last.empty()) router.from_client(caller, last, now);
    router.shutdown("the client closed its input");
    return;
  }
  bool oversized = lines_.feed(std::string_view(chunk.data(), static_cast<size_t>(n)),
                               [&](std::string_view line) {
                                 if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
                                 if (line.find_first_not_of(" \t") == std::string_view::npos)
                                   return;
                                 router.from_client(caller, line, now);
                               });
  if (oversized) router.client_message_too_long(caller, lines_.max_line());
}

// After the client's input ended too: it reads the answers to what it sent before.
void StdioClient::deliver(const Caller&, std::string line) {
  if (output_broken_) return;
  outbox_ += line;
  outbox_ += '\n';
}

void StdioClient::flush(SessionRouter& router) {
  if (has_output()) write(router);
}

void StdioClient::write(SessionRouter& router) {
  while (!outbox_.empty()) {
    ssize_t n = ::write(STDOUT_FILENO, outbox_.data(), outbox_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // the client is gone: its sessions end
      output_broken_ = true;
      outbox_.clear();
      if (input_open_) {
        input_open_ = false;
        router.shutdown("the client stopped reading");
      }
      return;
    }
    outbox_.erase(0, static_cast<size_t>(n));
  }
  give_back_room(outbox_);
}

}  // namespace belljar
