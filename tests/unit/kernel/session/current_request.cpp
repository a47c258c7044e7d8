// The request being served now, alone: ids are fresh and never reused (a dropped request spends
// one too), a silent cell takes no execution count, only a frame naming the running request by
// its id answers it, output is the request's own only for a cell or a comm handler (and, for text
// that names no request, once the worker has it), and a request ends once.
#include "kernel/session/current_request.hpp"

#include <catch2/catch.hpp>
#include <stdexcept>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

Cell cell_of(RequestKind kind, const std::string& id, const std::string& msg_id = "m1") {
  Cell cell;
  cell.kind = kind;
  cell.id = id;
  cell.request = request("execute_request", msg_id);
  return cell;
}

}  // namespace

TEST_CASE("current request: ids are fresh and never reused", "[current_request]") {
  CurrentRequest current;
  CHECK(current.fresh_id() == "r1");
  // A request that did not start (a comm message without a comm_id) spent its id.
  std::string second = current.fresh_id();
  CHECK(second == "r2");
  current.begin(cell_of(RequestKind::execute, current.fresh_id()));
  CHECK(current.cell().id == "r3");
  current.end();
  CHECK(current.fresh_id() == "r4");
  // The comm link's handlers take theirs from the same count.
  ++current.frame_ids();
  CHECK(current.fresh_id() == "r6");
}

TEST_CASE("current request: a silent cell takes no execution count", "[current_request]") {
  CurrentRequest current;
  CHECK(current.execution_count() == 0);
  CHECK(current.count_execution(false) == 1);
  CHECK(current.count_execution(true) == 1);
  CHECK(current.count_execution(false) == 2);
  CHECK(current.execution_count() == 2);
}

TEST_CASE("current request: only a frame naming the running request answers it",
          "[current_request]") {
  CurrentRequest current;
  CHECK_FALSE(current.answers({{"id", "r1"}}));
  current.begin(cell_of(RequestKind::execute, "r1"));
  CHECK(current.answers({{"type", "done"}, {"id", "r1"}}));
  CHECK_FALSE(current.answers({{"type", "done"}, {"id", "r0"}}));
  CHECK_FALSE(current.answers({{"type", "done"}}));
  CHECK_FALSE(current.answers({{"type", "done"}, {"id", 1}}));
  current.end();
  CHECK_FALSE(current.answers({{"type", "done"}, {"id", "r1"}}));
  // A request with no id yet is answered by no frame, not even one with an empty id.
  current.begin(cell_of(RequestKind::execute, ""));
  CHECK_FALSE(current.answers({{"type", "done"}, {"id", ""}}));
}

TEST_CASE("current request: a cell or a comm handler has output of its own, a lookup none",
          "[current_request]") {
  CurrentRequest current;
  CHECK_FALSE(current.executing());
  CHECK_FALSE(current.running_code());
  CHECK(current.output_parent() == nullptr);
  CHECK(current.get() == nullptr);
  CHECK(current.executing_cell() == nullptr);

  current.begin(cell_of(RequestKind::execute, "r1", "cell"));
  CHECK(current.executing());
  CHECK(current.running_code());
  REQUIRE(current.output_parent() != nullptr);
  CHECK(current.output_parent()->id() == "cell");
  CHECK(current.executing_cell() == &current.cell());
  current.end();

  current.begin(cell_of(RequestKind::comm, "r2", "handler"));
  CHECK_FALSE(current.executing());
  CHECK(current.running_code());
  REQUIRE(current.output_parent() != nullptr);
  CHECK(current.output_parent()->id() == "handler");
  CHECK(current.executing_cell() == nullptr);
  current.end();

  for (RequestKind lookup : {RequestKind::complete, RequestKind::inspect, RequestKind::is_complete,
                             RequestKind::comm_info}) {
    current.begin(cell_of(lookup, "r3"));
    CHECK_FALSE(current.executing());
    CHECK_FALSE(current.running_code());
    CHECK(current.output_parent() == nullptr);
    CHECK(current.get() == &current.cell());
    current.end();
  }
}

TEST_CASE("current request: text that names no request is its own once the worker has it",
          "[current_request]") {
  CurrentRequest current;
  for (RequestKind kind : {RequestKind::execute, RequestKind::comm}) {
    Cell& cell = current.begin(cell_of(kind, "r1"));
    CHECK_FALSE(current.worker_runs_code());  // held for its workspace survey
    cell.in_worker = true;
    CHECK(current.worker_runs_code());
    current.end();
  }
  Cell& lookup = current.begin(cell_of(RequestKind::complete, "r2"));
  lookup.in_worker = true;
  CHECK_FALSE(current.worker_runs_code());
}

TEST_CASE("current request: its budget is reset or handed, and outlives its end",
          "[current_request]") {
  CurrentRequest current;
  current.reset_budget(100);
  CHECK(current.budget().take(150) == 100);
  CHECK(current.budget().exhausted());
  current.reset_budget(100);
  CHECK(current.budget().room() == 100);
  current.set_budget(budget_of(10));
  CHECK(current.budget().limit() == 10);
}

TEST_CASE("current request: a request ends once, and begins only when none runs",
          "[current_request]") {
  CurrentRequest current;
  CHECK_THROWS_AS(current.end(), std::logic_error);
  current.begin(cell_of(RequestKind::execute, "r1", "first"));
  CHECK_THROWS_AS(current.begin(cell_of(RequestKind::execute, "r2", "second")), std::logic_error);
  CHECK(current.cell().request.id() == "first");
  Cell ended = current.end();
  CHECK(ended.request.id() == "first");
  CHECK_FALSE(current.active());
  CHECK_THROWS_AS(current.cell(), std::bad_optional_access);
}

TEST_CASE("current request: a rollback cell that ended well sets the session's count back",
          "[current_request]") {
  CurrentRequest current(4);
  for (int i = 0; i < 3; ++i) current.count_execution(false);
  Checkpoints::Facts facts;
  facts.in_cell = true;
  facts.execution_count = current.execution_count();
  current.checkpoints().ask({{"op", "make"}, {"name", "at3"}}, facts);
  CHECK(current.settle_checkpoint(true)["execution_count"] == 3);
  for (int i = 0; i < 4; ++i) current.count_execution(false);
  facts.execution_count = current.execution_count();
  current.checkpoints().ask({{"op", "rollback"}, {"name", "at3"}}, facts);
  CHECK(current.settle_checkpoint(true)["op"] == "rollback");
  CHECK(current.execution_count() == 3);
  // One that failed leaves the count alone.
  current.count_execution(false);
  current.checkpoints().ask({{"op", "rollback"}, {"name", "at3"}}, facts);
  CHECK(current.settle_checkpoint(false)["ok"] == false);
  CHECK(current.execution_count() == 4);
  // A cell that asked nothing settles nothing.
  CHECK(current.settle_checkpoint(true).is_null());
}
