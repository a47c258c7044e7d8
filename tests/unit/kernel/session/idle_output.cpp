// Output between requests (an asyncio task's, a thread's) has a budget of its own, refilled
// only by time, and the client is told once a window when any of it was withheld.
#include "kernel/session/idle_output.hpp"

#include <catch2/catch.hpp>

using namespace belljar;
using namespace std::chrono_literals;

TEST_CASE("output between requests gets the output limit a window, refilled only by time",
          "[idle_output]") {
  IdleOutput idle;
  IdleOutput::Clock::time_point now{};
  CHECK(idle.budget(now, 100).take_whole(80));
  CHECK(idle.budget(now + 30s, 100).room() == 20);  // the same window: spent stays spent
  CHECK_FALSE(idle.budget(now + 59s, 100).take_whole(21));
  CHECK(idle.budget(now + 60s, 100).room() == 100);  // a new window
}

TEST_CASE("past the messages of a window, each one more is withheld until the next",
          "[idle_output]") {
  IdleOutput idle;
  IdleOutput::Clock::time_point now{};
  for (uint64_t i = 0; i < IdleOutput::kMessagesPerWindow; ++i)
    REQUIRE(idle.admit_message(now, 1 << 20));
  CHECK_FALSE(idle.admit_message(now + 1s, 1 << 20));
  auto notice = idle.take_notice();
  REQUIRE(notice);
  CHECK(notice->find("more than 10000 messages a minute") != std::string::npos);
  CHECK(idle.admit_message(now + 61s, 1 << 20));
}

TEST_CASE("what was withheld is told once a window, naming the first reason", "[idle_output]") {
  IdleOutput idle;
  IdleOutput::Clock::time_point now{};
  idle.budget(now, 1 << 20);
  CHECK_FALSE(idle.take_notice());  // nothing withheld: nothing to say
  idle.withhold("comm_msg without a usable comm_id");
  idle.withhold("comm_open without a usable target_name");
  auto notice = idle.take_notice();
  REQUIRE(notice);
  CHECK(notice->starts_with("[belljar] output of code running between cells was withheld"));
  CHECK(notice->find("the first: comm_msg without a usable comm_id") != std::string::npos);
  idle.withhold("more");
  CHECK_FALSE(idle.take_notice());  // once a window
  idle.budget(now + 60s, 1 << 20);
  CHECK_FALSE(idle.take_notice());  // a new window, nothing withheld in it yet
}

TEST_CASE("text past the budget is told as the output limit a minute", "[idle_output]") {
  IdleOutput idle;
  IdleOutput::Clock::time_point now{};
  OutputBudget& budget = idle.budget(now, 1024);
  CHECK(budget.take(2048) == 1024);  // a stream: what fits goes, the rest is dropped
  auto notice = idle.take_notice();
  REQUIRE(notice);
  CHECK(notice->find("past the output limit of 1.0 KiB a minute (--output-limit)") !=
        std::string::npos);
}
