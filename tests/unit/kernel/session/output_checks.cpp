// The checks every piece of the worker's output passes, alone: a secret is redacted from a
// display, an invalid bundle is replaced by an explanation and an invalid update dropped, the
// whole message is charged to the budget, active output is neutralised, and a comm message of a
// shape no check foresaw is withheld with a bounded reason.
#include "kernel/session/output_checks.hpp"

#include <catch2/catch.hpp>

#include "kernel/protocol/base64.hpp"
#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

TEST_CASE("output checks: a display's secret is redacted and its size charged", "[output_checks]") {
  Redactor redactor({"sk-live-0123456789abcdef"});
  OutputChecks checks(redactor, ActiveOutput::isolate);
  OutputBudget budget = budget_of(1 << 20);
  auto shown = checks.display(WorkerFrame::display,
                              {{"data", {{"text/plain", "key sk-live-0123456789abcdef"}}}}, budget);
  REQUIRE(shown);
  std::string text = (*shown)["data"]["text/plain"];
  CHECK(text.find("sk-live") == std::string::npos);
  CHECK(budget.used() >= text.size());
}

TEST_CASE("output checks: an invalid bundle is explained, an invalid update dropped",
          "[output_checks]") {
  Redactor redactor;
  OutputChecks checks(redactor, ActiveOutput::isolate);
  OutputBudget budget = budget_of(1 << 20);
  auto shown = checks.display(WorkerFrame::display, {{"data", "not a bundle"}}, budget);
  REQUIRE(shown);
  CHECK((*shown)["data"]["text/plain"].get<std::string>().find("invalid display was dropped") !=
        std::string::npos);
  CHECK_FALSE(checks.display(WorkerFrame::update_display,
                             {{"data", {{"text/plain", "x"}}}, {"transient", json::object()}},
                             budget));
}

TEST_CASE("output checks: past the budget nothing is shown", "[output_checks]") {
  Redactor redactor;
  OutputChecks checks(redactor, ActiveOutput::isolate);
  OutputBudget budget = budget_of(16);
  CHECK_FALSE(checks.display(WorkerFrame::display,
                             {{"data", {{"text/plain", std::string(64, 'x')}}}}, budget));
}

TEST_CASE("output checks: active HTML does not reach the page as it was sent", "[output_checks]") {
  Redactor redactor;
  OutputChecks checks(redactor, ActiveOutput::isolate);
  OutputBudget budget = budget_of(1 << 20);
  std::string html = "<img src=x onerror=\"fetch('/api/contents')\">";
  auto shown = checks.display(WorkerFrame::display, {{"data", {{"text/html", html}}}}, budget);
  REQUIRE(shown);
  CHECK((*shown)["data"].dump().find("onerror=\\\"fetch") == std::string::npos);
}

TEST_CASE("output checks: a comm message of no known shape is withheld, its reason bounded",
          "[output_checks]") {
  Redactor redactor;
  OutputChecks checks(redactor, ActiveOutput::isolate);
  OutputBudget budget = budget_of(1 << 20);
  uint64_t cleaned = 0;
  auto refused = checks.comm(
      "comm_open",
      {{"comm_id", "c1"}, {"target_name", std::string(2000, 't')}, {"data", json::object()}},
      budget, cleaned);
  REQUIRE(std::holds_alternative<std::string>(refused));
  CHECK(std::get<std::string>(refused).size() < 400);
  auto passed = checks.comm("comm_open",
                            {{"comm_id", "c2"},
                             {"target_name", "jupyter.widget"},
                             {"data",
                              {{"state",
                                {{"_model_name", "IntSliderModel"},
                                 {"_model_module", "@jupyter-widgets/controls"},
                                 {"value", 3}}}}}},
                            budget, cleaned);
  CHECK(std::holds_alternative<WorkerComm>(passed));
}

TEST_CASE("output checks: a secret in a display's metadata or transient part is redacted",
          "[output_checks]") {
  Redactor redactor({"sk-live-0123456789abcdef"});
  OutputChecks checks(redactor, ActiveOutput::isolate);
  OutputBudget budget = budget_of(1 << 20);
  auto shown = checks.display(WorkerFrame::display,
                              {{"data", {{"text/plain", "x"}}},
                               {"metadata", {{"leak", "sk-live-0123456789abcdef"}}},
                               {"transient", {{"display_id", "sk-live-0123456789abcdef"}}}},
                              budget);
  REQUIRE(shown);
  CHECK(shown->dump().find("sk-live") == std::string::npos);
  CHECK((*shown)["transient"]["display_id"] == "[redacted]");
}

TEST_CASE("output checks: a secret in a comm message's buffers is redacted", "[output_checks]") {
  Redactor redactor({"sk-live-0123456789abcdef"});
  OutputChecks checks(redactor, ActiveOutput::allow);
  OutputBudget budget = budget_of(1 << 20);
  uint64_t cleaned = 0;
  auto passed = checks.comm("comm_msg",
                            {{"comm_id", "c1"},
                             {"data", {{"method", "custom"}}},
                             {"buffers", {base64_encode("token=sk-live-0123456789abcdef")}}},
                            budget, cleaned);
  REQUIRE(std::holds_alternative<WorkerComm>(passed));
  const auto& buffers = std::get<WorkerComm>(passed).buffers;
  REQUIRE(buffers.size() == 1);
  CHECK(buffers[0].find("sk-live") == std::string::npos);
  CHECK(buffers[0] == "token=[redacted]");
}
