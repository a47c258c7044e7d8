// ReplayGuard: a bounded memory of signatures already accepted.
#include "kernel/protocol/replay_guard.hpp"

#include <catch2/catch.hpp>
#include <deque>
#include <random>
#include <set>
#include <string>

#include "kernel/protocol/signer.hpp"

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

// The guard's table is its own (open addressing, entries moved back as others are forgotten):
// checked against the plainest model of the promise, a set and a queue, over a long mix of new
// signatures, replays and signatures forgotten and seen again.
TEST_CASE("replay guard answers as a set of the last N signatures would", "[replay]") {
  for (size_t capacity : {1u, 2u, 7u, 64u, 1000u}) {
    INFO("capacity " << capacity);
    ReplayGuard guard(capacity);
    std::set<std::string> model;
    std::deque<std::string> order;
    std::mt19937 random(static_cast<unsigned>(capacity));
    // Drawn from a pool a few times the capacity, so each kind of answer comes up often.
    std::uniform_int_distribution<size_t> pick(0, 3 * capacity + 2);
    for (int i = 0; i < 20000; ++i) {
      std::string signature = "sig-" + std::to_string(pick(random));
      bool fresh = !model.count(signature);
      REQUIRE(guard.admit(signature) == fresh);
      if (fresh) {
        model.insert(signature);
        order.push_back(signature);
        if (order.size() > capacity) {
          model.erase(order.front());
          order.pop_front();
        }
      }
      REQUIRE(guard.size() == order.size());
    }
  }
}

TEST_CASE("replay guard holds real signatures over many times its capacity", "[replay]") {
  ReplayGuard guard(1000);
  belljar::Signer signer("key");
  auto signature = [&](int n) { return signer.sign({"message " + std::to_string(n)}); };
  for (int n = 0; n < 50000; ++n) REQUIRE(guard.admit(signature(n)));
  CHECK(guard.size() == 1000);
  for (int n = 49000; n < 50000; n += 37) CHECK_FALSE(guard.admit(signature(n)));
  CHECK(guard.admit(signature(48999)));  // the newest one forgotten
}
