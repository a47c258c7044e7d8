#pragma once
// The egress proxy's relay: one direction of a proxied connection (client -> upstream or
// upstream -> client), written once and used for both.
//
// A step reads what the source has, as far as the buffer's room and the connection's framing
// allow, and sends what the sink takes. Reads stop when the buffer is full (that is the
// backpressure against a side that sends faster than the other reads) and resume when it
// drains; the readiness flags of the edge-triggered epoll remember the rest. A direction that
// turns out to be bulk goes on by splice() through a pipe, so its bytes move as page references
// instead of through the supervisor's memory; the pipes are budgeted (two descriptors each).
// What a direction may carry (a plain request's declared body, a response head still to be
// rewritten) is the connection's business (egress_connection.hpp), passed in as a Framing.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "sandbox/egress/egress_buffer.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

// A direction's bulk path: socket -> pipe -> socket by splice(). The pipe's capacity is that
// direction's buffer then.
struct Splice {
  Fd read, write;
  size_t bytes = 0;  // in the pipe now
  size_t capacity = 64 * 1024;
};

// The pipes the bulk directions of all connections hold, within a budget.
class SpliceBudget {
 public:
  explicit SpliceBudget(size_t max) : max_(max) {}
  // A new pipe, or nothing when the budget is spent or the system has none to give.
  std::optional<Splice> open();
  void release(size_t pipes) { open_ -= pipes; }

 private:
  size_t open_ = 0;
  size_t max_;
};

// One side's socket as the relay sees it; the flags are the connection's own.
struct Endpoint {
  int fd;
  bool& readable;  // last seen readable, until EAGAIN says otherwise
  bool& writable;
  bool& eof;  // the side sent its end of file
};

struct Direction {
  Buffer buffer;
  std::optional<Splice> splice;
  uint64_t carried = 0;  // bytes delivered to the sink
  // Nothing is held on the way, in the buffer or in the pipe.
  bool drained() const { return buffer.empty() && (!splice || splice->bytes == 0); }
};

// What the connection allows this step.
struct Framing {
  size_t read_limit = SIZE_MAX;  // bytes the source may still send on; 0 reads nothing
  bool may_go_bulk = false;      // the direction may move to a pipe once it is bulk
  // Called after reading: how many bytes from the buffer's front may go (and may edit the
  // buffer first); empty means all of them.
  std::function<size_t()> sendable;
};

struct RelayStep {
  bool broken = false;  // a socket failed: the connection is over
  bool moved = false;   // bytes moved (or an end of file was seen)
  size_t read = 0;      // through the buffer, this step
  size_t sent = 0;
};

RelayStep relay_step(Direction& direction, Endpoint from, Endpoint to, const Framing& framing,
                     SpliceBudget& pipes);

}  // namespace belljar
