#pragma once
// `belljar mcp --http HOST:PORT`: MCP's Streamable HTTP transport on /mcp, in front of the
// session router (kernel/mcp_router). The HTTP side runs on its own thread (Boost.Beast on one
// asio io_context: every connection asynchronous, so a slow client or a long cell holds no
// thread); it hands the router what clients sent through a queue and an eventfd the router's
// loop polls, and the router's answers come back posted to that thread.
//
// Clients: a POST of `initialize` without an Mcp-Session-Id starts an MCP session (the id is
// minted here, a uuid4, and its own sandbox starts with it); later requests carry the id, and
// DELETE ends it. A request of the stateless 2026-07-28 revision carries no id: all of them
// share the server's own session, the one started with the server. A request is answered as
// JSON, or as an event stream once it has progress or output to send before its answer (or
// after 10 s, so a proxy does not time a long cell out); closing that stream cancels it. GET
// gives an MCP session a stream of its other notifications.
//
// What passes at the door: http_rules.hpp. Bounds: a body of kMaxMcpBody, headers of
// kMaxMcpHeaders, a request's headers within 30 s of the connection being idle, at most
// kMaxHttpConnections connections, and kMaxQueuedOutput bytes queued for a client that does not
// read (past it the connection is closed and its calls cancelled).
#include <memory>
#include <string>
#include <vector>

#include "kernel/mcp_http/http_rules.hpp"
#include "kernel/mcp_router/client_side.hpp"

namespace belljar {

inline constexpr size_t kMaxHttpConnections = 256;
inline constexpr size_t kMaxQueuedOutput = 16u << 20;

struct McpHttpOptions {
  HttpAddress address;
  std::string token;
  std::vector<std::string> proxied_hosts;  // --http-host: names a proxy in front forwards
};

class McpHttpServer : public ClientSide {
 public:
  // Listens at once (a port in use is said here, before any session starts).
  explicit McpHttpServer(McpHttpOptions options);
  ~McpHttpServer() override;  // its thread stopped, every connection closed
  McpHttpServer(const McpHttpServer&) = delete;
  McpHttpServer& operator=(const McpHttpServer&) = delete;

  // Where it listens (the port chosen when 0 was asked).
  const HttpAddress& address() const;

  void open(SessionRouter& router) override;
  void add_poll_items(std::vector<pollfd>& items) override;
  void handle(const std::vector<pollfd>& items, size_t first, SessionRouter& router,
              SessionRouter::Clock::time_point now) override;
  void deliver(const Caller& caller, std::string line) override;
  void flush(SessionRouter&) override {}
  void call_dropped(const Caller& caller) override;
  void client_ended(SessionRouter::ClientKey key) override;
  bool has_output() const override { return false; }
  // Each connection bounds its own queue (kMaxQueuedOutput) and is closed past it.
  bool backlogged() const override { return false; }
  void stop() override;

  struct Impl;  // the HTTP thread's state: defined beside its connections, in the .cpp only

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace belljar
