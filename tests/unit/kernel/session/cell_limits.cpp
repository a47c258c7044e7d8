// A cell's limits alone, on a fake sandbox (our LimitedSandbox: a CPU clock the test moves, and
// what was sent to it) and fake doors: past --timeout or --cpu the sandbox is interrupted once
// and killed 2 s later if the cell ignores it; the error names the limit; %%limits only
// tightens; paused time is not counted while the session is idle, and is forfeited when it
// burns CPU; CPU spent between cells is charged to the next and stops the sandbox past --cpu.
#include "kernel/session/cell_limits.hpp"

#include <catch2/catch.hpp>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;
using Clock = CellLimits::Clock;

namespace {

class FakeSandbox final : public LimitedSandbox {
 public:
  double cpu_seconds() const override { return cpu; }
  void interrupt() override { ++interrupts; }
  void kill() override { ++kills; }
  bool set_memory_limit(uint64_t bytes, std::string* why) override {
    if (!memory_movable) {
      *why = "no memory cgroup";
      return false;
    }
    memory = bytes;
    return true;
  }
  double cpu = 0;
  int interrupts = 0, kills = 0;
  bool memory_movable = true;
  uint64_t memory = 0;
};

struct Rig {
  Policy policy;
  FakeAudit audit;
  Metrics metrics{""};
  RateLimitedLog log{10};
  FakeClient client;
  FakeSandbox sandbox;
  CellLimits limits{policy, audit, metrics, log, client};
  Rig() {
    policy.timeout_seconds = 10;
    policy.cpu_seconds = 5;
    policy.debug_pause_seconds = 60;
  }
  Cell cell(Clock::time_point started) {
    Cell cell;
    cell.request = request("execute_request", "m1");
    cell.started = started;
    cell.timeout = policy.timeout_seconds;
    cell.cpu_limit = policy.cpu_limit();
    return cell;
  }
};

}  // namespace

TEST_CASE("cell limits: past the timeout the sandbox is interrupted once, then killed",
          "[cell_limits]") {
  Rig rig;
  auto t0 = Clock::now();
  Cell cell = rig.cell(t0);
  rig.limits.check(cell, rig.sandbox, t0 + 9s);
  CHECK(rig.sandbox.interrupts == 0);
  rig.limits.check(cell, rig.sandbox, t0 + 10s);
  CHECK(rig.sandbox.interrupts == 1);
  CHECK(cell.limit_hit == LimitHit::timeout);
  rig.limits.check(cell, rig.sandbox, t0 + 11s);
  CHECK(rig.sandbox.interrupts == 1);
  CHECK(rig.sandbox.kills == 0);
  rig.limits.check(cell, rig.sandbox, t0 + 12s);
  CHECK(rig.sandbox.kills == 1);
  std::string ename, evalue;
  json traceback = json::array();
  rig.limits.name_limit_in_error(cell, ename, evalue, traceback);
  CHECK(ename == "TimeoutError");
  CHECK(evalue.find("wall-clock limit of 10 s (--timeout)") != std::string::npos);
}

TEST_CASE("cell limits: CPU ahead of the clock is stopped as the CPU limit", "[cell_limits]") {
  Rig rig;
  auto t0 = Clock::now();
  Cell cell = rig.cell(t0);
  rig.sandbox.cpu = 6;  // threads: 6 s of CPU in 2 s
  rig.limits.check(cell, rig.sandbox, t0 + 2s);
  CHECK(cell.limit_hit == LimitHit::cpu);
  CHECK(rig.sandbox.interrupts == 1);
  std::string ename, evalue;
  json traceback = json::array();
  rig.limits.name_limit_in_error(cell, ename, evalue, traceback);
  CHECK(evalue.find("CPU-time limit of 5 s (--cpu)") != std::string::npos);
}

TEST_CASE("cell limits: %%limits only tightens, and says what it refused", "[cell_limits]") {
  Rig rig;
  Cell cell = rig.cell(Clock::now());
  OutputBudget budget;
  budget.reset(1 << 20);
  json reply = rig.limits.ask(
      cell, &rig.sandbox, {{"type", "limits"}, {"timeout", "3"}, {"output_limit", "1K"}}, budget);
  CHECK(reply["ok"] == true);
  CHECK(cell.timeout <= 3.5);
  CHECK(budget.limit() == 1024);
  json refused =
      rig.limits.ask(cell, &rig.sandbox, {{"type", "limits"}, {"timeout", "100"}}, budget);
  CHECK(refused["ok"] == false);
  CHECK(cell.timeout <= 3.5);
  rig.sandbox.memory_movable = false;
  json memory =
      rig.limits.ask(cell, &rig.sandbox, {{"type", "limits"}, {"memory", "100M"}}, budget);
  CHECK(memory["ok"] == false);
  CHECK(memory["error"].get<std::string>().find("no memory cgroup") != std::string::npos);
  CHECK(cell.memory_limit == 0);
}

TEST_CASE("cell limits: a pause while idle is not counted, one while busy is forfeited",
          "[cell_limits]") {
  Rig rig;
  auto t0 = Clock::now();
  Cell cell = rig.cell(t0);
  rig.limits.note_pause(&cell, &rig.sandbox, true, t0 + 1s);
  rig.limits.check(cell, rig.sandbox, t0 + 20s);  // 19 s paused, idle: not counted
  CHECK(rig.sandbox.interrupts == 0);
  CHECK(rig.limits.counted_seconds(cell, t0 + 20s) == Approx(1).margin(0.01));

  Rig busy;
  Cell other = busy.cell(t0);
  busy.limits.note_pause(&other, &busy.sandbox, true, t0 + 1s);
  busy.sandbox.cpu = 4.5;  // the session burns CPU while it says it is paused
  busy.limits.check(other, busy.sandbox, t0 + 3s);
  CHECK(other.paused.forfeited());
  CHECK(busy.audit.of("debug_pause_refused").size() == 1);
  busy.limits.check(other, busy.sandbox, t0 + 11s);
  CHECK(busy.sandbox.interrupts == 1);
}

TEST_CASE("cell limits: CPU between cells is charged to the next, and past --cpu stops all",
          "[cell_limits]") {
  Rig rig;
  auto t0 = Clock::now();
  rig.limits.worker_ready(0);
  rig.sandbox.cpu = 2;
  CHECK(rig.limits.request_started(2) == Approx(2));
  rig.limits.request_finished(2.5, true);
  rig.sandbox.cpu = 4;
  WireMessage last = request("execute_request", "m9");
  CHECK_FALSE(rig.limits.check_between_cells(rig.sandbox, t0, 3, &last));
  rig.sandbox.cpu = 8;
  // Sampled every half second, and says when the next sample is due (the reactor wakes for it).
  CHECK(rig.limits.background_sample_due() == t0 + CellLimits::kBackgroundSample);
  CHECK_FALSE(rig.limits.check_between_cells(rig.sandbox, t0 + 400ms, 3, &last));
  CHECK(rig.limits.check_between_cells(rig.sandbox, t0 + 500ms, 3, &last));
  REQUIRE(rig.audit.of("background_cpu").size() == 1);
  CHECK(rig.audit.of("background_cpu")[0]["after_execution_count"] == 3);
  REQUIRE(rig.client.of("stream").size() == 1);
  CHECK(rig.client.of("stream")[0].parent == "m9");
  auto why = rig.limits.take_background_stop();
  REQUIRE(why);
  CHECK(why->find("after cell [3]") != std::string::npos);
  CHECK_FALSE(rig.limits.take_background_stop());
}

TEST_CASE("cell limits: a worker's exit is named for what ended it", "[cell_limits]") {
  Rig rig;
  Cell cell = rig.cell(Clock::now());
  WorkerExit oom;
  oom.memory_limit = true;
  CHECK(rig.limits.after_exit(cell, oom, "signal 9").ename == "MemoryError");
  CHECK(cell.limit_hit == LimitHit::memory);
  Cell ignored = rig.cell(Clock::now());
  ignored.kill_at = Clock::now();
  ignored.limit_hit = LimitHit::cpu;
  auto timeout = rig.limits.after_exit(ignored, WorkerExit{}, "signal 9");
  CHECK(timeout.ename == "TimeoutError");
  CHECK(timeout.status == CellStatus::timeout);
  Cell crashed = rig.cell(Clock::now());
  CHECK(rig.limits.after_exit(crashed, WorkerExit{}, "signal 11 (SIGSEGV)").ename == "WorkerDied");
}
