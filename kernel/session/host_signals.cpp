#include "kernel/session/host_signals.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "kernel/observability/diagnostics.hpp"
#include "sandbox/jail_client/worker_process.hpp"

namespace belljar {

sigset_t HostSignals::handled() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);  // interrupt_mode "signal": Jupyter signals the kernel process
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

void HostSignals::listen() {
  sigset_t set = handled();
  signals_.reset(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!signals_) throw SandboxError(std::string("signalfd: ") + std::strerror(errno));
}

HostSignals::Heard HostSignals::take_signals() {
  Heard heard;
  signalfd_siginfo info{};
  while (::read(signals_.get(), &info, sizeof info) == sizeof info) {
    switch (info.ssi_signo) {
      case SIGINT:
        ++heard.interrupts;
        break;
      case SIGTERM:
      case SIGHUP:
        log_line("signal " + std::to_string(info.ssi_signo) + ": shutting down");
        heard.shutdown = true;
        break;
      case SIGCHLD:
        break;  // the core looks at the worker after every take
    }
  }
  return heard;
}

bool HostSignals::take_client_gone(bool pidfd_readable) {
  if (!pidfd_readable && !parent_.gone()) return false;
  log_line("the client that started the kernel (pid " + std::to_string(parent_.pid()) +
           ") exited: shutting down");
  parent_ = ParentWatch();  // its pidfd stays readable: watched no more
  return true;
}

}  // namespace belljar
