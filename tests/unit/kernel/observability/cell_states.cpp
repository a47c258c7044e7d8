// Cell states as values: the one spelling of each for the wire, the audit log and the
// metrics, and the metrics file listing every status (workspace_quota included).
#include "kernel/observability/cell_states.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "kernel/observability/metrics.hpp"
#include "kernel/session/request_kind.hpp"

using namespace belljar;

TEST_CASE("each cell status and limit has one distinct name") {
  std::set<std::string_view> statuses, limits;
  for (CellStatus status : kCellStatuses) statuses.insert(status_name(status));
  for (LimitHit limit : kLimitsHit) limits.insert(limit_name(limit));
  CHECK(statuses == std::set<std::string_view>{"ok", "error", "interrupted", "timeout", "memory",
                                               "workspace_quota", "crashed"});
  CHECK(limits == std::set<std::string_view>{"timeout", "cpu", "memory", "workspace"});
  CHECK(limit_name(LimitHit::none).empty());
}

TEST_CASE("a limit names the status a cell is recorded with") {
  CHECK(status_for(LimitHit::none, false, false) == CellStatus::ok);
  CHECK(status_for(LimitHit::none, true, false) == CellStatus::error);
  CHECK(status_for(LimitHit::none, true, true) == CellStatus::interrupted);
  CHECK(status_for(LimitHit::cpu, true, true) == CellStatus::timeout);
  CHECK(status_for(LimitHit::timeout, true, false) == CellStatus::timeout);
  CHECK(status_for(LimitHit::memory, true, false) == CellStatus::memory);
  CHECK(status_for(LimitHit::workspace, true, false) == CellStatus::workspace_quota);
}

TEST_CASE("requests the worker answers are spelled in one table") {
  CHECK(request_kind("execute_request") == RequestKind::execute);
  CHECK(request_kind("is_complete_request") == RequestKind::is_complete);
  CHECK_FALSE(request_kind("kernel_info_request"));
  CHECK_FALSE(request_kind("execute"));
  CHECK(worker_answer(RequestKind::execute) == WorkerFrame::done);
  CHECK(worker_answer(RequestKind::comm) == WorkerFrame::done);
  CHECK(worker_answer(RequestKind::complete) == WorkerFrame::complete_reply);
  CHECK(worker_request(RequestKind::is_complete) == "is_complete");
  for (auto kind : {RequestKind::execute, RequestKind::complete, RequestKind::inspect,
                    RequestKind::is_complete})
    CHECK(request_kind(request_type(kind)) == kind);
}

TEST_CASE("the metrics file counts cells stopped by the workspace quota") {
  char dir[] = "/tmp/belljar-metrics-XXXXXX";
  REQUIRE(::mkdtemp(dir));
  std::string path = std::string(dir) + "/belljar.prom";
  {
    Metrics metrics(path);
    metrics.cell(CellStatus::workspace_quota, 0.2, false, LimitHit::workspace);
    metrics.cell(CellStatus::timeout, 1.5, false, LimitHit::cpu);
    metrics.flush(Metrics::Clock::now(), true);
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("belljar_cells_total{status=\"workspace_quota\"} 1\n") !=
        std::string::npos);
  CHECK(text.str().find("belljar_cells_total{status=\"timeout\"} 1\n") != std::string::npos);
  CHECK(text.str().find("belljar_limit_hits_total{limit=\"workspace\"} 1\n") != std::string::npos);
  CHECK(text.str().find("belljar_limit_hits_total{limit=\"cpu\"} 1\n") != std::string::npos);
  std::filesystem::remove_all(dir);
}
