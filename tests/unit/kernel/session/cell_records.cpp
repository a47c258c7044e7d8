// What a finished cell leaves, alone, through fake doors: the reply carries the cell's count and
// its facts; the audit record names the code by hash (by text, redacted, only with --audit-code)
// and its outcome; user_expressions are redacted and charged to the cell's budget; output past
// the limit is told; history keeps what the cell asked to keep; %audit shows the last records
// as recorded, oldest first.
#include "kernel/session/cell_records.hpp"

#include <catch2/catch.hpp>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

namespace {

struct Rig {
  Policy policy;
  std::string session = "kernel-1";
  FakeAudit audit;
  Metrics metrics{""};
  RateLimitedLog log{10};
  Redactor redactor{std::vector<std::string>{kSecret}};
  FakeClient client;
  CellRecords records{policy, session, audit, metrics, log, redactor, client};
  OutputBudget budget;
  Rig() { budget.reset(1 << 20); }
  Cell cell(int count, const std::string& code) {
    Cell cell;
    cell.request = request("execute_request", "m" + std::to_string(count));
    cell.execution_count = count;
    cell.code = code;
    cell.started = CellRecords::Clock::now();
    cell.started_iso = "2026-12-07T00:00:00Z";
    return cell;
  }
};

}  // namespace

TEST_CASE("cell records: the reply carries the count and the facts, the record the hash",
          "[cell_records]") {
  Rig rig;
  Cell cell = rig.cell(3, "x = 1");
  cell.memory_limit = 100u << 20;  // %%limits moved it for this cell
  CellRecords::Measured measured;
  measured.cpu_seconds = 0.25;
  measured.stdout_bytes = 12;
  auto reply = rig.records.finish(cell, {{"type", "done"}}, measured, rig.budget);
  CHECK(reply.content["status"] == "ok");
  CHECK(reply.content["execution_count"] == 3);
  CHECK(reply.metadata["engine"] == "kernel-1");
  const json& facts = reply.metadata["belljar"];
  CHECK(facts["cpu_ms"] == 250.0);
  CHECK(facts["output_bytes"]["stdout"] == 12);
  CHECK(facts["limits"]["memory_bytes"] == 100u << 20);
  auto cells = rig.audit.of("cell");
  REQUIRE(cells.size() == 1);
  CHECK(cells[0]["status"] == "ok");
  CHECK(cells[0]["code_bytes"] == 5);
  CHECK_FALSE(cells[0].contains("code"));  // only with --audit-code
  CHECK(rig.records.history({{"hist_access_type", "tail"}, {"n", 10}}).dump().find("x = 1") !=
        std::string::npos);
}

TEST_CASE("cell records: user_expressions are redacted and charged to the cell's budget",
          "[cell_records]") {
  Rig rig;
  Cell cell = rig.cell(1, "pass");
  cell.expressions_asked = {{"k", "os.environ['KEY']"}};
  json done = {
      {"type", "done"},
      {"user_expressions",
       {{"k",
         {{"status", "ok"}, {"data", {{"text/plain", kSecret}}}, {"metadata", json::object()}}}}}};
  auto reply = rig.records.finish(cell, done, {}, rig.budget);
  CHECK(reply.content.dump().find(kSecret) == std::string::npos);
  CHECK(reply.content["user_expressions"]["k"]["data"]["text/plain"] == "[redacted]");
  CHECK(rig.budget.used() > 0);
}

TEST_CASE("cell records: output past the limit is told, and the record says so", "[cell_records]") {
  Rig rig;
  rig.budget.reset(4);
  rig.budget.take(100);  // the cell printed past its limit
  Cell cell = rig.cell(2, "print('x' * 100)");
  rig.records.finish(cell, {{"type", "done"}}, {}, rig.budget);
  auto told = rig.client.of("stream");
  REQUIRE(told.size() == 1);
  CHECK(told[0].parent == "m2");
  CHECK(told[0].content["text"].get<std::string>().find("output limit") != std::string::npos);
  CHECK(rig.audit.of("cell")[0]["truncated"] == true);
}

TEST_CASE("cell records: with --audit-code the code is recorded, redacted, an error names it",
          "[cell_records]") {
  Rig rig;
  rig.policy.audit_code = true;
  Cell cell = rig.cell(4, "key = '" + kSecret + "'; 1/0");
  cell.error = json{
      {"ename", "ZeroDivisionError"}, {"evalue", "division by zero"}, {"traceback", json::array()}};
  auto reply = rig.records.finish(cell, {{"type", "done"}}, {}, rig.budget);
  CHECK(reply.content["status"] == "error");
  auto record = rig.audit.of("cell")[0];
  CHECK(record["status"] == "error");
  CHECK(record["ename"] == "ZeroDivisionError");
  CHECK(record["code"].get<std::string>().find("[redacted]") != std::string::npos);
  CHECK(record.dump().find(kSecret) == std::string::npos);
}

TEST_CASE("cell records: %audit shows the last records as recorded, oldest first",
          "[cell_records]") {
  Rig rig;
  for (int i = 1; i <= 5; ++i) {
    Cell cell = rig.cell(i, "c" + std::to_string(i));
    rig.records.finish(cell, {{"type", "done"}}, {}, rig.budget);
  }
  json last = rig.records.recent(2);
  REQUIRE(last.size() == 2);
  CHECK(last[0]["execution_count"] == 4);
  CHECK(last[1]["execution_count"] == 5);
  CHECK(rig.records.recent(100).size() == 5);
}
