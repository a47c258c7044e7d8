// The last step of the worker's output, alone, on a fake client: a display, a clear_output, a
// stream frame and a comm message are checked, charged to the budget they are given and published
// under the parent they are given; a stream frame names stdout or stderr or is dropped, its text
// redacted and cut on a character boundary; past the budget nothing is published.
#include "kernel/session/output_publisher.hpp"

#include <catch2/catch.hpp>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

namespace {

struct Rig {
  FakeClient client;
  Redactor redactor{{"sk-live-0123456789abcdef"}};
  OutputChecks checks{redactor, ActiveOutput::allow};
  RateLimitedLog log{10};
  OutputPublisher publisher{client, checks, log};
  WireMessage parent = request("execute_request", "cell-1");
};

}  // namespace

TEST_CASE("output publisher: a display goes under the parent given, charged to its budget",
          "[output_publisher]") {
  Rig rig;
  OutputBudget budget = budget_of(1 << 20);
  CHECK(rig.publisher.display(WorkerFrame::display, {{"data", {{"text/plain", "hi"}}}}, budget,
                              &rig.parent));
  REQUIRE(rig.client.of("display_data").size() == 1);
  CHECK(rig.client.of("display_data")[0].parent == "cell-1");
  CHECK(budget.used() > 0);
  CHECK(rig.publisher.display(
      WorkerFrame::update_display,
      {{"data", {{"text/plain", "hi"}}}, {"transient", {{"display_id", "d"}}}}, budget, nullptr));
  CHECK(rig.client.of("update_display_data").size() == 1);
}

TEST_CASE("output publisher: a clear_output is output, charged, past the budget it is not sent",
          "[output_publisher]") {
  Rig rig;
  OutputBudget budget = budget_of(1 << 20);
  CHECK(rig.publisher.clear_output({{"wait", true}}, budget, &rig.parent));
  REQUIRE(rig.client.of("clear_output").size() == 1);
  CHECK(rig.client.of("clear_output")[0].content == json{{"wait", true}});
  CHECK(budget.used() > 0);
  OutputBudget spent = budget_of(4);
  CHECK_FALSE(rig.publisher.clear_output(json::object(), spent, &rig.parent));
  CHECK(rig.client.of("clear_output").size() == 1);
}

TEST_CASE("output publisher: a stream frame names stdout or stderr, or is dropped",
          "[output_publisher]") {
  Rig rig;
  OutputBudget budget = budget_of(1 << 20);
  rig.publisher.stream({{"name", "stdin"}, {"text", "x"}}, budget, &rig.parent);
  rig.publisher.stream({{"text", "x"}}, budget, &rig.parent);
  CHECK(rig.client.sent.empty());
  rig.publisher.stream({{"name", "stderr"}, {"text", "x"}}, budget, &rig.parent);
  REQUIRE(rig.client.of("stream").size() == 1);
  CHECK(rig.client.of("stream")[0].content["name"] == "stderr");
}

TEST_CASE("output publisher: a stream's text is redacted and cut on a character boundary",
          "[output_publisher]") {
  Rig rig;
  OutputBudget budget = budget_of(1 << 20);
  rig.publisher.stream({{"name", "stdout"}, {"text", "key sk-live-0123456789abcdef"}}, budget,
                       &rig.parent);
  REQUIRE(rig.client.of("stream").size() == 1);
  CHECK(rig.client.of("stream")[0].content["text"].get<std::string>().find("sk-live") ==
        std::string::npos);
  OutputBudget small = budget_of(5);  // the second é would be cut in half
  rig.publisher.stream({{"name", "stdout"}, {"text", "ab\u00e9\u00e9"}}, small, &rig.parent);
  REQUIRE(rig.client.of("stream").size() == 2);
  CHECK(rig.client.of("stream")[1].content["text"] == "ab\u00e9");  // not half of the second é
  CHECK(small.exhausted());
}

TEST_CASE("output publisher: a comm message is published checked, or withheld with why",
          "[output_publisher]") {
  Rig rig;
  OutputBudget budget = budget_of(1 << 20);
  uint64_t cleaned = 0;
  CHECK(rig.publisher.comm("comm_open",
                           {{"comm_id", "c1"}, {"target_name", "t"}, {"data", json::object()}},
                           budget, &rig.parent, cleaned) == "");
  REQUIRE(rig.client.of("comm_open").size() == 1);
  CHECK(rig.client.of("comm_open")[0].parent == "cell-1");
  CHECK(rig.publisher.comm("comm_msg", {{"comm_id", ""}}, budget, &rig.parent, cleaned) ==
        "comm_msg without a usable comm_id");
  CHECK(rig.client.of("comm_msg").empty());
}
