// The kernel follows the client that started it: a pidfd on its parent that becomes readable
// when the parent exits, nothing watched when no client asked, and a parent already gone seen.
#include "kernel/session/parent_watch.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "kernel/session/fd_probes.hpp"

using namespace belljar;
using namespace belljar::testing;

TEST_CASE("the parent's pidfd becomes readable when it exits", "[parent_watch]") {
  LaunchingClient client;
  ParentWatch watch = ParentWatch::of(client.pid(), always);
  REQUIRE(watch.fd() >= 0);
  CHECK_FALSE(watch.gone());
  CHECK_FALSE(readable(watch.fd()));
  client.go();
  pollfd item{watch.fd(), POLLIN, 0};
  REQUIRE(::poll(&item, 1, 10'000) == 1);
  CHECK(readable(watch.fd()));
}

TEST_CASE("no client asked, a parent that is init, or one already gone", "[parent_watch]") {
  CHECK(ParentWatch::from_environment(nullptr).fd() == -1);
  CHECK(ParentWatch::from_environment("").fd() == -1);
  CHECK_FALSE(ParentWatch::from_environment(nullptr).gone());
  // Asked, with this process's real parent (the test runner): watched.
  ParentWatch asked = ParentWatch::from_environment("12345");
  if (::getppid() > 1) CHECK(asked.fd() >= 0);
  CHECK(asked.pid() == (::getppid() > 1 ? ::getppid() : 0));
  // The number read as the parent's no longer is: it exited before it was watched.
  ParentWatch moved = ParentWatch::of(::getppid(), never);
  CHECK(moved.gone());
  CHECK(moved.fd() == -1);
  // A pid no process has.
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  CHECK(ParentWatch::of(child, always).gone());
}
