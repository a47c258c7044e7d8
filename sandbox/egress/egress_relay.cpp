// One direction of a proxied connection, through the buffer or by splice() (egress_relay.hpp).
#include "sandbox/egress/egress_relay.hpp"

#include <fcntl.h>

#include <cerrno>

namespace belljar {

namespace {

// A direction that has carried this much is bulk: it goes on by splice().
constexpr uint64_t kSpliceAfter = 256 * 1024;
constexpr size_t kPipeBytes = 256 * 1024;

// One step of socket -> pipe -> socket. Returns -1 on a broken connection, 1 if bytes moved
// (or end of file was seen), 0 otherwise. EAGAIN from the first splice is ambiguous (no
// data, or the pipe has no free slot): the source counts as drained only with an empty pipe.
int splice_move(Splice& pipe, Endpoint from, Endpoint to, uint64_t& carried) {
  int moved = 0;
  if (from.readable && !from.eof && pipe.bytes < pipe.capacity) {
    ssize_t n = ::splice(from.fd, nullptr, pipe.write.get(), nullptr, pipe.capacity - pipe.bytes,
                         SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      pipe.bytes += static_cast<size_t>(n);
      moved = 1;
    } else if (n == 0) {
      from.eof = true;
      moved = 1;
    } else if (errno == EAGAIN) {
      if (pipe.bytes == 0) from.readable = false;
    } else if (errno != EINTR) {
      return -1;
    }
  }
  if (to.writable && pipe.bytes > 0) {
    size_t want = pipe.bytes;
    ssize_t n =
        ::splice(pipe.read.get(), nullptr, to.fd, nullptr, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      pipe.bytes -= static_cast<size_t>(n);
      carried += static_cast<uint64_t>(n);
      moved = 1;
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return -1;
    }
    if (n < static_cast<ssize_t>(want)) to.writable = false;
  }
  return moved;
}

}  // namespace

std::optional<Splice> SpliceBudget::open() {
  if (open_ >= max_) return std::nullopt;
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return std::nullopt;
  ++open_;
  // A bigger pipe moves more per call; where the system won't have it, 64 KiB will do.
  int size = ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(kPipeBytes));
  Splice splice;
  splice.capacity = size > 0 ? static_cast<size_t>(size) : 64 * 1024;
  splice.read.reset(fds[0]);
  splice.write.reset(fds[1]);
  return splice;
}

RelayStep relay_step(Direction& d, Endpoint from, Endpoint to, const Framing& framing,
                     SpliceBudget& pipes) {
  RelayStep step;
  if (!d.splice && framing.may_go_bulk && d.buffer.empty() && d.carried >= kSpliceAfter)
    d.splice = pipes.open();
  if (d.splice) {
    int r = splice_move(*d.splice, from, to, d.carried);
    step.broken = r < 0;
    step.moved = r > 0;
    return step;
  }
  if (framing.read_limit > 0 && from.readable && !from.eof && d.buffer.space() > 0) {
    ssize_t n = d.buffer.fill(from.fd, framing.read_limit);
    if (n > 0) {
      step.moved = true;
      step.read = static_cast<size_t>(n);
    } else if (n == 0) {
      from.eof = step.moved = true;
    } else if (errno == EAGAIN) {
      from.readable = false;
    } else {
      step.broken = true;
      return step;
    }
  }
  size_t ready = framing.sendable ? framing.sendable() : d.buffer.size();
  if (to.writable && ready > 0) {
    ssize_t n = d.buffer.drain(to.fd, ready);
    if (n > 0) {
      step.moved = true;
      step.sent = static_cast<size_t>(n);
      d.carried += static_cast<uint64_t>(n);
    }
    if (n < 0 && errno != EAGAIN) {
      step.broken = true;
      return step;
    }
    if (n < static_cast<ssize_t>(ready)) to.writable = false;  // its socket buffer is full
  }
  return step;
}

}  // namespace belljar
