#pragma once
// The jail init's half of the egress path. Inside the sandbox's network namespace it listens
// on 127.0.0.1:PORT and [::1]:PORT; each connection it accepts is passed, as a descriptor, to
// the supervisor's proxy over a SOCK_SEQPACKET socket (fd_passing.hpp), and init closes its
// copy. Init copies no bytes and never blocks on the proxy: when the channel is full (the
// proxy is behind; its send buffer holds a few hundred descriptors in flight) connections wait
// in a bounded queue for POLLOUT, and when that is full init stops accepting, so clients wait
// in the listen backlog. When the proxy is gone the listeners close: connects are refused.
#include <poll.h>

#include <cstdint>
#include <deque>
#include <vector>

#include "sandbox/os/fd.hpp"

namespace belljar {

class EgressForwarder {
 public:
  static constexpr size_t kMaxPending = 256;

  // Takes the channel. Throws SetupError when 127.0.0.1:port cannot be had; [::1] is best
  // effort (a kernel without IPv6 has none).
  EgressForwarder(uint16_t port, Fd channel);

  // Appends the descriptors to poll, always the same number of entries (-1 for one that is
  // not wanted now); hand poll()'s results for those entries back to on_ready().
  void poll_set(std::vector<pollfd>& fds) const;
  void on_ready(const pollfd* fds);

  size_t pending() const { return pending_.size(); }

 private:
  void accept_from(int listener);
  void flush();
  void close_all();

  Fd channel_;
  std::vector<Fd> listeners_;
  std::deque<Fd> pending_;
};

}  // namespace belljar
