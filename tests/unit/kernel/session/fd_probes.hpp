#pragma once
// Small probes the session tests share: whether a descriptor is readable now, the liveness
// answers a ParentWatch may be given in place of kill(pid, 0), and a launching client that
// lives until the test lets it go.
#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace belljar::testing {

inline bool readable(int fd) {
  pollfd item{fd, POLLIN, 0};
  return ::poll(&item, 1, 0) == 1 && (item.revents & POLLIN);
}
inline bool always(pid_t) {
  return true;
}
inline bool never(pid_t) {
  return false;
}

// A forked child standing for the client that launched the kernel: it lives until go(), and is
// reaped when the test ends.
class LaunchingClient {
 public:
  LaunchingClient() {
    int gate[2];
    REQUIRE(::pipe(gate) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {  // lives until the gate closes
      ::close(gate[1]);
      char byte;
      (void)!::read(gate[0], &byte, 1);
      ::_exit(0);
    }
    ::close(gate[0]);
    gate_ = gate[1];
  }
  ~LaunchingClient() {
    go();
    ::waitpid(pid_, nullptr, 0);
  }
  LaunchingClient(const LaunchingClient&) = delete;
  LaunchingClient& operator=(const LaunchingClient&) = delete;
  pid_t pid() const { return pid_; }
  void go() {
    if (gate_ >= 0) ::close(gate_);
    gate_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int gate_ = -1;
};

}  // namespace belljar::testing
