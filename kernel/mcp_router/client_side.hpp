#pragma once
// What carries the clients' messages to the router and its answers back: stdio
// (stdio_client.hpp), or the Streamable HTTP server (kernel/mcp_http). The router's loop
// (router_loop.hpp) polls its descriptors beside the sessions' and hands it what to deliver.
#include <poll.h>

#include <string>
#include <vector>

#include "kernel/mcp_router/session_router.hpp"

namespace belljar {

class ClientSide {
 public:
  using Caller = SessionRouter::Caller;
  virtual ~ClientSide() = default;
  // Called once before the loop: the router as it starts (the clients it must know).
  virtual void open(SessionRouter& router) = 0;
  virtual void add_poll_items(std::vector<pollfd>& items) = 0;
  // After poll, its items from `first` on: what arrived is given to `router`.
  virtual void handle(const std::vector<pollfd>& items, size_t first, SessionRouter& router,
                      SessionRouter::Clock::time_point now) = 0;
  virtual void deliver(const Caller& caller, std::string line) = 0;
  // After each round of deliveries: what can be written is, and a client found gone is told
  // to `router`.
  virtual void flush(SessionRouter& router) = 0;
  // A call the client cancelled is never answered: what waits for its answer ends.
  virtual void call_dropped(const Caller& caller) = 0;
  // The router forgot the client (its own session ended for good).
  virtual void client_ended(SessionRouter::ClientKey key) = 0;
  // Output still queued: the loop writes it before it ends.
  virtual bool has_output() const = 0;
  // So much is queued that the sessions' output is left in their pipes until it drains.
  virtual bool backlogged() const = 0;
  // The server was stopped (a signal): no more input is taken.
  virtual void stop() = 0;
};

}  // namespace belljar
