// The host's signals alone: real signals, sent to this test's own thread only while they are
// blocked in it (so none can take its default action, and all are drained before the mask is
// restored), read from the part's signalfd; and a real launching client, a forked child whose
// exit makes its pidfd readable.
#include "kernel/session/host_signals.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "kernel/session/fd_probes.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

// The handled signals blocked in this thread for the scope; whatever is left pending is taken
// before the old mask comes back.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigset_t set = HostSignals::handled();
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~BlockedSignals() {
    sigset_t set = HostSignals::handled();
    timespec none{};
    while (::sigtimedwait(&set, nullptr, &none) > 0) {
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t old_{};
};

void send_to_this_thread(int signo) {
  REQUIRE(::pthread_kill(::pthread_self(), signo) == 0);
}

}  // namespace

TEST_CASE("SIGINT interrupts, SIGTERM and SIGHUP shut down, SIGCHLD only wakes", "[host_signals]") {
  BlockedSignals blocked;
  HostSignals host{ParentWatch()};
  host.listen();
  REQUIRE(host.signal_fd() >= 0);
  CHECK(host.parent_fd() == -1);
  CHECK_FALSE(readable(host.signal_fd()));
  HostSignals::Heard heard = host.take_signals();
  CHECK(heard.interrupts == 0);
  CHECK_FALSE(heard.shutdown);

  send_to_this_thread(SIGINT);
  CHECK(readable(host.signal_fd()));
  heard = host.take_signals();
  CHECK(heard.interrupts == 1);
  CHECK_FALSE(heard.shutdown);
  CHECK_FALSE(readable(host.signal_fd()));  // taken whole

  send_to_this_thread(SIGCHLD);
  heard = host.take_signals();
  CHECK(heard.interrupts == 0);
  CHECK_FALSE(heard.shutdown);

  for (int signo : {SIGTERM, SIGHUP}) {
    send_to_this_thread(signo);
    heard = host.take_signals();
    CHECK(heard.interrupts == 0);
    CHECK(heard.shutdown);
  }

  send_to_this_thread(SIGTERM);
  send_to_this_thread(SIGINT);
  heard = host.take_signals();
  CHECK(heard.interrupts == 1);
  CHECK(heard.shutdown);
}

TEST_CASE("the launching client's exit is told once, then it is watched no more",
          "[host_signals]") {
  LaunchingClient client;
  HostSignals host{ParentWatch::of(client.pid(), always)};
  REQUIRE(host.parent_fd() >= 0);
  CHECK_FALSE(host.take_client_gone(false));
  CHECK(host.parent_fd() >= 0);
  client.go();
  pollfd item{host.parent_fd(), POLLIN, 0};
  REQUIRE(::poll(&item, 1, 10'000) == 1);
  CHECK(host.take_client_gone(true));
  CHECK(host.parent_fd() == -1);
  CHECK_FALSE(host.take_client_gone(false));
}

TEST_CASE("a launching client gone before it was watched is told once", "[host_signals]") {
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  HostSignals host{ParentWatch::of(child, never)};
  CHECK(host.parent_fd() == -1);
  CHECK(host.take_client_gone(false));
  CHECK_FALSE(host.take_client_gone(false));
}

TEST_CASE("no launching client: nothing is ever told", "[host_signals]") {
  HostSignals host{ParentWatch::from_environment(nullptr)};
  CHECK(host.parent_fd() == -1);
  CHECK_FALSE(host.take_client_gone(false));
}
