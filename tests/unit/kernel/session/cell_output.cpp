// What the worker's output frames mean for the running request, alone, through fake doors: a
// display is shown under its request and its mime types kept for the audit; a silent cell's
// result and errors are not published; a lookup shows nothing and a comm handler no result;
// past the budget a further error is not published, but a cell's first always is; an error
// shown and caught does not fail the cell; a limit's interrupt is named for the limit; input()
// is refused to the worker for a comm handler, without allow_stdin and past the budget, and a
// prompt is redacted; %audit gets the supervisor's own records, outside a cell an empty list.
#include "kernel/session/cell_output.hpp"

#include <catch2/catch.hpp>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

namespace {

class FakePrompt final : public CellOutput::Prompt {
 public:
  void request_input(const WireMessage& request, json content) override {
    asked.push_back({request.id(), std::move(content)});
  }
  std::vector<std::pair<std::string, json>> asked;
};

struct Rig {
  Policy policy;
  FakeClient client;
  FakeWorker worker;
  FakeAudit audit;
  Metrics metrics{""};
  RateLimitedLog log{10};
  Redactor redactor{std::vector<std::string>{kSecret}};
  OutputChecks checks{redactor, ActiveOutput::isolate};
  std::string session = "kernel-1";  // CellRecords keeps a reference to it
  CellRecords records{policy, session, audit, metrics, log, redactor, client};
  CellLimits limits{policy, audit, metrics, log, client};
  FakePrompt prompt;
  CellOutput output{client, worker, checks, log, redactor, records, audit, limits, prompt};
  CurrentRequest current;

  // The request the worker runs now, on a budget of `bytes`.
  Cell& run(RequestKind kind, uint64_t bytes = 1 << 20, const std::string& msg_id = "cell") {
    Cell cell;
    cell.kind = kind;
    cell.id = current.fresh_id();
    cell.request = request(std::string(request_type(kind)), msg_id);
    cell.execution_count = kind == RequestKind::execute ? current.count_execution(false) : 0;
    cell.in_worker = true;
    current.reset_budget(bytes);
    return current.begin(std::move(cell));
  }
};

json display(const std::string& text) {
  return {{"type", "display"}, {"data", {{"text/plain", text}}}, {"metadata", json::object()}};
}

json result(const std::string& text) {
  return {{"type", "result"}, {"data", {{"text/plain", text}}}, {"metadata", json::object()}};
}

json error(const std::string& ename, bool fails_cell = true) {
  return {{"type", "error"},
          {"ename", ename},
          {"evalue", "went wrong"},
          {"traceback", json::array({ename + ": went wrong"})},
          {"fails_cell", fails_cell}};
}

}  // namespace

TEST_CASE("cell output: a display is shown under its request, its mime types audited",
          "[cell_output]") {
  Rig rig;
  Cell& cell = rig.run(RequestKind::execute);
  rig.output.on_output(WorkerFrame::display, display("key " + kSecret), rig.current);
  auto shown = rig.client.of("display_data");
  REQUIRE(shown.size() == 1);
  CHECK(shown[0].parent == "cell");
  CHECK(shown[0].content["data"]["text/plain"].get<std::string>().find(kSecret) ==
        std::string::npos);
  CHECK(cell.displays == json::array({json::array({"text/plain"})}));
  CHECK(rig.current.budget().used() > 0);
  json update = display("again");
  update["transient"] = {{"display_id", "d1"}};
  rig.output.on_output(WorkerFrame::update_display, update, rig.current);
  CHECK(rig.client.of("update_display_data").size() == 1);
}

TEST_CASE("cell output: a result carries the count, a silent cell's is not published",
          "[cell_output]") {
  Rig rig;
  Cell& cell = rig.run(RequestKind::execute);
  rig.output.on_output(WorkerFrame::result, result("42"), rig.current);
  auto results = rig.client.of("execute_result");
  REQUIRE(results.size() == 1);
  CHECK(results[0].content["execution_count"] == cell.execution_count);
  CHECK(cell.result_text == "42");
  rig.current.end();

  Cell& silent = rig.run(RequestKind::execute);
  silent.silent = true;
  rig.output.on_output(WorkerFrame::result, result("43"), rig.current);
  CHECK(rig.client.of("execute_result").size() == 1);
  CHECK(silent.result_text.empty());
}

TEST_CASE("cell output: a lookup shows nothing, a comm handler no result", "[cell_output]") {
  Rig rig;
  rig.run(RequestKind::complete);
  rig.output.on_output(WorkerFrame::display, display("x"), rig.current);
  rig.output.on_clear_output({{"type", "clear_output"}}, rig.current);
  CHECK(rig.client.sent.empty());
  rig.current.end();

  rig.run(RequestKind::comm, 1 << 20, "handler");
  rig.output.on_output(WorkerFrame::result, result("1"), rig.current);
  CHECK(rig.client.of("execute_result").empty());
  rig.output.on_output(WorkerFrame::display, display("shown"), rig.current);
  rig.output.on_clear_output({{"type", "clear_output"}, {"wait", false}}, rig.current);
  REQUIRE(rig.client.of("display_data").size() == 1);
  CHECK(rig.client.of("display_data")[0].parent == "handler");
  REQUIRE(rig.client.of("clear_output").size() == 1);
  CHECK(rig.client.of("clear_output")[0].parent == "handler");
  // A handler's error is not a cell's: it fails nothing and is not published.
  rig.output.on_error(error("ValueError"), rig.current);
  CHECK(rig.client.of("error").empty());
  CHECK_FALSE(rig.current.cell().error);
}

TEST_CASE("cell output: past the budget a second error is not published, the first always is",
          "[cell_output]") {
  Rig rig;
  Cell& cell = rig.run(RequestKind::execute, 8);
  rig.current.budget().take(8);
  REQUIRE(rig.current.budget().exhausted());
  rig.output.on_error(error("FirstError"), rig.current);
  REQUIRE(rig.client.of("error").size() == 1);
  CHECK(rig.client.of("error")[0].parent == "cell");
  REQUIRE(cell.error);
  rig.output.on_error(error("SecondError"), rig.current);
  CHECK(rig.client.of("error").size() == 1);
  // The reply carries the last one.
  CHECK((*cell.error)["ename"] == "SecondError");
}

TEST_CASE("cell output: a flood of errors shown and caught ends once the cap is spent",
          "[cell_output]") {
  // The red team's cell: IPython's showtraceback in a loop under --output-limit 1k. The name and
  // the start of the message are always kept, and were never charged: every error was shown.
  Rig rig;
  rig.run(RequestKind::execute, 1024);
  json shown = error("ValueError", false);
  shown["evalue"] = std::string(1024, 'V');
  for (int i = 0; i < 500; ++i) rig.output.on_error(shown, rig.current);
  CHECK(rig.client.of("error").size() == 1);
  CHECK(rig.current.budget().exhausted());

  // Raw frames with no traceback at all, each small: the same.
  Rig raw;
  raw.run(RequestKind::execute, 4096);
  json bare = {{"type", "error"},
               {"ename", std::string(256, 'N')},
               {"evalue", "v"},
               {"traceback", json::array()},
               {"fails_cell", false}};
  for (int i = 0; i < 2000; ++i) raw.output.on_error(bare, raw.current);
  CHECK(raw.client.of("error").size() <= 4096 / 257 + 1);
}

TEST_CASE("cell output: an error shown and caught is output only, a silent cell's is kept",
          "[cell_output]") {
  Rig rig;
  Cell& cell = rig.run(RequestKind::execute);
  rig.output.on_error(error("ShownError", false), rig.current);
  CHECK(rig.client.of("error").size() == 1);
  CHECK_FALSE(cell.error);
  rig.current.end();

  Cell& silent = rig.run(RequestKind::execute);
  silent.silent = true;
  rig.output.on_error(error("QuietError"), rig.current);
  CHECK(rig.client.of("error").size() == 1);
  REQUIRE(silent.error);
  CHECK((*silent.error)["ename"] == "QuietError");
}

TEST_CASE("cell output: an error is redacted, and a limit's interrupt named for the limit",
          "[cell_output]") {
  Rig rig;
  Cell& cell = rig.run(RequestKind::execute);
  cell.limit_hit = LimitHit::timeout;
  cell.timeout = 5;
  json frame = error("KeyboardInterrupt");
  frame["evalue"] = "leaked " + kSecret;
  rig.output.on_error(frame, rig.current);
  REQUIRE(cell.error);
  CHECK((*cell.error)["ename"] == "TimeoutError");
  CHECK(rig.client.of("error")[0].content.dump().find(kSecret) == std::string::npos);
}

TEST_CASE("cell output: input() is refused to the worker where no prompt may be shown",
          "[cell_output]") {
  Rig rig;
  json ask = {{"type", "input_request"}, {"prompt", "key? " + kSecret}, {"password", true}};
  SECTION("a comm handler has no prompt") {
    rig.run(RequestKind::comm);
    rig.output.on_input_request(ask, rig.current);
    REQUIRE(rig.worker.frames.size() == 1);
    CHECK(rig.worker.frames[0]["type"] == "input_reply");
    CHECK(rig.worker.frames[0].contains("error"));
  }
  SECTION("a cell whose client said allow_stdin false") {
    rig.run(RequestKind::execute).allow_stdin = false;
    rig.output.on_input_request(ask, rig.current);
    REQUIRE(rig.worker.frames.size() == 1);
    CHECK(rig.worker.frames[0]["error"] == "this frontend does not support input requests");
  }
  SECTION("past the budget") {
    rig.run(RequestKind::execute, CellOutput::kInputRequestCost - 1).allow_stdin = true;
    rig.output.on_input_request({{"type", "input_request"}}, rig.current);
    REQUIRE(rig.worker.frames.size() == 1);
    CHECK(rig.worker.frames[0]["error"] == "the cell's output limit was reached");
  }
  SECTION("a lookup: neither asked nor answered") {
    rig.run(RequestKind::inspect);
    rig.output.on_input_request(ask, rig.current);
    CHECK(rig.worker.frames.empty());
  }
  CHECK(rig.prompt.asked.empty());
}

TEST_CASE("cell output: a cell's prompt reaches the client redacted, charged", "[cell_output]") {
  Rig rig;
  rig.run(RequestKind::execute).allow_stdin = true;
  rig.output.on_input_request(
      {{"type", "input_request"}, {"prompt", "key? " + kSecret}, {"password", true}}, rig.current);
  CHECK(rig.worker.frames.empty());
  REQUIRE(rig.prompt.asked.size() == 1);
  CHECK(rig.prompt.asked[0].first == "cell");
  CHECK(rig.prompt.asked[0].second["password"] == true);
  CHECK(rig.prompt.asked[0].second["prompt"].get<std::string>().find(kSecret) == std::string::npos);
  CHECK(rig.current.budget().used() >= CellOutput::kInputRequestCost);
}

TEST_CASE("cell output: %audit gets the recorded cells, outside a cell an empty list",
          "[cell_output]") {
  Rig rig;
  // A cell recorded as the core records one.
  Cell& first = rig.run(RequestKind::execute);
  first.code = "x = 1";
  first.started = CellRecords::Clock::now();
  first.started_iso = "2026-12-07T00:00:00Z";
  rig.records.finish(first, {{"type", "done"}}, {}, rig.current.budget());
  rig.current.end();

  rig.run(RequestKind::execute);
  rig.output.on_audit_request({{"type", "audit_request"}, {"last", 5}}, rig.current);
  REQUIRE(rig.worker.frames.size() == 1);
  CHECK(rig.worker.frames[0]["type"] == "audit_reply");
  REQUIRE(rig.worker.frames[0]["records"].size() == 1);
  CHECK(rig.worker.frames[0]["records"][0]["execution_count"] == 1);
  CHECK_FALSE(rig.worker.frames[0].contains("log_error"));
  rig.current.end();

  rig.run(RequestKind::comm);
  rig.output.on_audit_request({{"type", "audit_request"}}, rig.current);
  REQUIRE(rig.worker.frames.size() == 2);
  CHECK(rig.worker.frames[1]["records"] == json::array());
  rig.current.end();

  rig.run(RequestKind::is_complete);
  rig.output.on_audit_request({{"type", "audit_request"}}, rig.current);
  CHECK(rig.worker.frames.size() == 2);  // a lookup runs no code: nothing asked it
}

TEST_CASE("cell output: %audit says the audit log is failing", "[cell_output]") {
  Rig rig;
  rig.audit.failing = true;
  rig.audit.record("probe", json::object());
  rig.run(RequestKind::execute);
  rig.output.on_audit_request({{"type", "audit_request"}}, rig.current);
  REQUIRE(rig.worker.frames.size() == 1);
  CHECK(rig.worker.frames[0].contains("log_error"));
}
