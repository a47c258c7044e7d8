// The worker's life alone, with no sandbox: each transition (starting, ready after hello, an exit
// once ready or before, MCP's reset), the back-off's sequence and its cap, a second hello refused,
// and a start failure at launch (the kernel refuses to start) against one after a restart.
#include "kernel/session/worker_life.hpp"

#include <catch2/catch.hpp>

#include "kernel/output/active_output.hpp"

using namespace belljar;
using json = nlohmann::json;
using std::chrono::milliseconds;
using Clock = WorkerLife::Clock;

namespace {

const json kHello = {{"type", "hello"}, {"language_info", {{"version", "3.12.1"}}}};

// A life whose first worker said hello.
WorkerLife ready_life() {
  WorkerLife life;
  life.starting();
  life.started({});
  REQUIRE(life.hello(kHello));
  return life;
}

// How long after `now` the back-off's restart is due.
milliseconds back_off(const WorkerLife& life, Clock::time_point now) {
  REQUIRE(life.restart_due());
  return std::chrono::duration_cast<milliseconds>(*life.restart_due() - now);
}

}  // namespace

TEST_CASE("a worker is ready after its hello, with language_info built by the supervisor",
          "[worker_life]") {
  WorkerLife life;
  life.starting();
  life.started({"no seccomp user notification"});
  CHECK_FALSE(life.ready());
  CHECK(life.start_error().empty());
  CHECK(life.notes() == std::vector<std::string>{"no seccomp user notification"});
  json forged = {{"type", "hello"},
                 {"language_info", {{"version", "3.12.1"}, {"codemirror_mode", "../../x"}}}};
  REQUIRE(life.hello(forged));
  CHECK(life.ready());
  CHECK(life.language_info() == language_info_from_worker(forged["language_info"]));
  CHECK(life.language_info()["version"] == "3.12.1");
  CHECK(life.language_info()["codemirror_mode"] != "../../x");
  CHECK(life.restarts() == 0);
  CHECK_FALSE(life.restart_due());
}

TEST_CASE("a hello without language_info still makes the worker ready", "[worker_life]") {
  WorkerLife life;
  life.starting();
  REQUIRE(life.hello({{"type", "hello"}}));
  CHECK(life.ready());
  CHECK(life.language_info() == language_info_from_worker(json::object()));
}

TEST_CASE("a second hello is refused and changes nothing", "[worker_life]") {
  WorkerLife life = ready_life();
  json before = life.language_info();
  CHECK_FALSE(life.hello({{"type", "hello"}, {"language_info", {{"version", "2.7.18"}}}}));
  CHECK(life.ready());
  CHECK(life.language_info() == before);
}

TEST_CASE("the first start's failure refuses the kernel, one after a restart is retried",
          "[worker_life]") {
  auto now = Clock::now();
  SECTION("at launch") {
    WorkerLife life;
    life.starting();
    CHECK_FALSE(life.start_failed("the sandbox could not be started: no userns", now));
    CHECK(life.start_error().empty());
    CHECK_FALSE(life.restart_due());
    CHECK(life.restarts() == 0);
  }
  SECTION("after the worker exited once ready") {
    WorkerLife life = ready_life();
    REQUIRE(life.exited("exit status 1", false, now) == WorkerLife::AfterExit::start_now);
    life.starting();
    CHECK(life.start_failed("the sandbox could not be started: no userns", now));
    CHECK_FALSE(life.ready());
    CHECK(life.start_error() == "the sandbox could not be started: no userns");
    CHECK(back_off(life, now) == milliseconds(100));
  }
  SECTION("after MCP's reset") {
    WorkerLife life = ready_life();
    life.reset();
    life.starting();
    CHECK(life.start_failed("the sandbox could not be started: no userns", now));
    CHECK(life.start_error() == "the sandbox could not be started: no userns");
    CHECK(life.restart_due());
  }
}

TEST_CASE("a worker that exits once ready is started again at once", "[worker_life]") {
  WorkerLife life = ready_life();
  CHECK(life.exited("killed by signal 9", false, Clock::now()) == WorkerLife::AfterExit::start_now);
  CHECK_FALSE(life.ready());
  CHECK(life.start_error().empty());
  CHECK_FALSE(life.restart_due());
  CHECK(life.restarts() == 1);
}

TEST_CASE("a worker that exits before its hello says why and is started after a back-off",
          "[worker_life]") {
  auto now = Clock::now();
  WorkerLife life;
  life.starting();
  life.started({});
  CHECK(life.exited("exit status 127", false, now) == WorkerLife::AfterExit::back_off);
  CHECK_FALSE(life.ready());
  CHECK(life.start_error() == "the Python worker exited before it was ready (exit status 127)");
  CHECK(life.restarts() == 1);
  CHECK(back_off(life, now) == milliseconds(100));
  // Due once, at its time.
  CHECK_FALSE(life.take_restart(now + milliseconds(99)));
  CHECK(life.take_restart(now + milliseconds(100)));
  CHECK_FALSE(life.take_restart(now + milliseconds(100)));
  CHECK_FALSE(life.restart_due());
  // The next worker's hello ends the failure.
  life.starting();
  CHECK(life.start_error() == "the Python worker exited before it was ready (exit status 127)");
  REQUIRE(life.hello(kHello));
  CHECK(life.start_error().empty());
}

TEST_CASE("the back-off doubles from 50 ms per failed start, capped at 5 s, and a hello resets it",
          "[worker_life]") {
  auto now = Clock::now();
  WorkerLife life = ready_life();
  REQUIRE(life.exited("exit status 1", false, now) == WorkerLife::AfterExit::start_now);
  std::vector<long> delays;
  for (int i = 0; i < 9; ++i) {
    life.starting();
    // Failures of both kinds count alike: a dead interpreter, a sandbox that cannot start.
    if (i % 2 == 0)
      REQUIRE(life.exited("exit status 1", false, now) == WorkerLife::AfterExit::back_off);
    else
      REQUIRE(life.start_failed("the sandbox could not be started: x", now));
    delays.push_back(back_off(life, now).count());
    REQUIRE(life.take_restart(*life.restart_due()));
  }
  CHECK(delays == std::vector<long>{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000});
  life.starting();
  REQUIRE(life.hello(kHello));
  REQUIRE(life.exited("exit status 1", false, now) == WorkerLife::AfterExit::start_now);
  life.starting();
  REQUIRE(life.exited("exit status 1", false, now) == WorkerLife::AfterExit::back_off);
  CHECK(back_off(life, now) == milliseconds(100));
}

TEST_CASE("an exit during shutdown starts nothing", "[worker_life]") {
  auto now = Clock::now();
  SECTION("once ready") {
    WorkerLife life = ready_life();
    CHECK(life.exited("killed by signal 15", true, now) == WorkerLife::AfterExit::none);
    CHECK_FALSE(life.ready());
    CHECK(life.restarts() == 1);
  }
  SECTION("before its hello") {
    WorkerLife life;
    life.starting();
    CHECK(life.exited("killed by signal 15", true, now) == WorkerLife::AfterExit::none);
    CHECK(life.start_error().empty());
    CHECK_FALSE(life.restart_due());
  }
}

TEST_CASE("MCP's reset drops a pending restart and the back-off, keeping the last failure said",
          "[worker_life]") {
  auto now = Clock::now();
  WorkerLife life = ready_life();
  REQUIRE(life.exited("exit status 1", false, now) == WorkerLife::AfterExit::start_now);
  for (int i = 0; i < 3; ++i) {
    life.starting();
    REQUIRE(life.exited("exit status 1", false, now) == WorkerLife::AfterExit::back_off);
  }
  REQUIRE(back_off(life, now) == milliseconds(400));
  life.reset();
  CHECK_FALSE(life.ready());
  CHECK_FALSE(life.restart_due());
  CHECK_FALSE(life.take_restart(now + std::chrono::seconds(10)));
  CHECK(life.restarts() == 5);
  // Queued cells are still refused with the reason until a worker says hello.
  CHECK(life.start_error() == "the Python worker exited before it was ready (exit status 1)");
  life.starting();
  REQUIRE(life.exited("exit status 1", false, now) == WorkerLife::AfterExit::back_off);
  CHECK(back_off(life, now) == milliseconds(100));
}

TEST_CASE("a reset of a ready worker makes it not ready until the next hello", "[worker_life]") {
  WorkerLife life = ready_life();
  life.reset();
  CHECK_FALSE(life.ready());
  CHECK(life.restarts() == 1);
  life.starting();
  life.started({"a note"});
  CHECK(life.hello(kHello));
  CHECK(life.ready());
  CHECK(life.notes() == std::vector<std::string>{"a note"});
}
