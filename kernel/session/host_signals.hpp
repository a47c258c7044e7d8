#pragma once
// What the host asks of the kernel outside the Jupyter protocol, as the reactor polls it: SIGINT
// (interrupt_mode "signal": Jupyter signals the kernel process) interrupts the running cell;
// SIGTERM and SIGHUP shut the kernel down; SIGCHLD only wakes the reactor to look at the worker;
// and the client that launched the kernel (parent_watch.hpp) exiting shuts it down, once. The
// signals never run a handler: blocked (handled()) before any thread starts, so ZMQ's threads and
// the egress proxy's inherit the mask, they wait on a signalfd that the reactor's thread alone
// reads between its other work, so an interrupt can never land in the middle of a frame's
// handling. Any other signal keeps its default action.
// Doors: none; what was heard is the return value, for the core to act on.
#include <signal.h>

#include "kernel/session/parent_watch.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

class HostSignals {
 public:
  // What the signals pending asked for.
  struct Heard {
    int interrupts = 0;     // SIGINTs read: the running cell is interrupted, once each
    bool shutdown = false;  // SIGTERM or SIGHUP
  };

  // The signals the kernel takes on its signalfd: to be blocked in the thread that makes the
  // kernel before any other thread starts (pthread_sigmask), so that all threads inherit the mask.
  static sigset_t handled();

  explicit HostSignals(ParentWatch parent) : parent_(std::move(parent)) {}
  // Opens the signalfd for handled() (SandboxError when it cannot).
  void listen();

  // Polled by the reactor: the signalfd, and the launching client's pidfd (-1: not watched).
  int signal_fd() const { return signals_.get(); }
  int parent_fd() const { return parent_.fd(); }

  // The signals pending, read now (SIGTERM and SIGHUP logged).
  Heard take_signals();
  // Whether the launching client is gone: its pidfd polled readable (`pidfd_readable`), or it had
  // exited before it was watched. Said once: logged, and watched no more.
  bool take_client_gone(bool pidfd_readable);

 private:
  Fd signals_;
  // The client that launched the kernel (JPY_PARENT_PID), read as the kernel is made.
  ParentWatch parent_;
};

}  // namespace belljar
