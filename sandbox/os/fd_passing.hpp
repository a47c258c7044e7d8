#pragma once
// Descriptors over a unix socket (SCM_RIGHTS): how the jail's init hands each connection made
// to the sandbox's proxy port to the supervisor. One descriptor per message, on a
// SOCK_SEQPACKET pair, so a message boundary can never split or merge two of them.
#include "sandbox/os/fd.hpp"

namespace belljar {

// Sends `fd` (with one byte of payload) without blocking. Returns 0, or the errno: EAGAIN when
// the receiver is behind (the caller drops the connection rather than wait), EPIPE when it is
// gone.
int send_fd(int channel, int fd) noexcept;

// Receives one descriptor without blocking; it arrives close-on-exec. Extra descriptors a
// misbehaving sender packed into the message are closed. `status` is 0 with a descriptor, 0
// with none for a message that carried none, EAGAIN when nothing is waiting, -1 at end of file
// (the sender closed its end), or another errno.
Fd receive_fd(int channel, int& status) noexcept;

}  // namespace belljar
