// ReplayGuard: a bounded memory of signatures already accepted.
#include "kernel/protocol/replay_guard.hpp"

#include <catch2/catch.hpp>

using belljar::ReplayGuard;

TEST_CASE("replay guard admits a new signature", "[replay]") {
  ReplayGuard guard;
  CHECK(guard.admit("sig-a"));
  CHECK(guard.admit("sig-b"));
  CHECK(guard.size() == 2);
}

TEST_CASE("replay guard refuses a signature it has seen", "[replay]") {
  ReplayGuard guard;
  REQUIRE(guard.admit("sig-a"));
  CHECK_FALSE(guard.admit("sig-a"));
  CHECK_FALSE(guard.admit("sig-a"));
  CHECK(guard.size() == 1);
}

TEST_CASE("replay guard forgets the oldest signature past capacity", "[replay]") {
  ReplayGuard guard(3);
  for (const char* sig : {"1", "2", "3"}) REQUIRE(guard.admit(sig));
  REQUIRE(guard.admit("4"));  // pushes "1" out
  CHECK(guard.size() == 3);
  CHECK_FALSE(guard.admit("2"));
  CHECK_FALSE(guard.admit("3"));
  CHECK_FALSE(guard.admit("4"));
  CHECK(guard.admit("1"));  // forgotten, so admitted again (and "2" is now the oldest out)
  CHECK(guard.admit("2"));
  CHECK(guard.size() == 3);
}

TEST_CASE("replay guard stays bounded over many signatures", "[replay]") {
  ReplayGuard guard(100);
  for (int i = 0; i < 10000; ++i) REQUIRE(guard.admit("sig-" + std::to_string(i)));
  CHECK(guard.size() == 100);
  CHECK_FALSE(guard.admit("sig-9999"));
  CHECK_FALSE(guard.admit("sig-9900"));
  CHECK(guard.admit("sig-9899"));
}

TEST_CASE("replay guard refusing a duplicate does not evict anything", "[replay]") {
  ReplayGuard guard(2);
  REQUIRE(guard.admit("a"));
  REQUIRE(guard.admit("b"));
  for (int i = 0; i < 5; ++i) CHECK_FALSE(guard.admit("b"));
  CHECK_FALSE(guard.admit("a"));
}
