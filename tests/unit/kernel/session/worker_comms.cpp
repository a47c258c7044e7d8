// The worker's comm messages are passed on only in their checked shape, or refused with the
// reason; comm_info lists only usable entries (and, unless allowed, the comms the page knows);
// comm handlers share one output budget a window at a time.
#include "kernel/session/worker_comms.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace belljar;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {
std::string refusal(std::string_view type, const json& frame) {
  auto checked = check_worker_comm(type, frame);
  auto* why = std::get_if<std::string>(&checked);
  return why ? *why : "";
}
}  // namespace

TEST_CASE("a worker's comm message passes in its checked shape", "[worker_comms]") {
  auto checked = check_worker_comm("comm_open", {{"comm_id", "c1"},
                                                 {"target_name", "jupyter.widget"},
                                                 {"target_module", json::array()},
                                                 {"data", {{"state", {{"value", 3}}}}},
                                                 {"metadata", {{"version", "2.1.0"}}},
                                                 {"buffers", {"AAEC"}},
                                                 {"extra", "dropped"}});
  REQUIRE(std::holds_alternative<WorkerComm>(checked));
  const WorkerComm& comm = std::get<WorkerComm>(checked);
  CHECK(comm.content == json{{"comm_id", "c1"},
                             {"data", {{"state", {{"value", 3}}}}},
                             {"target_name", "jupyter.widget"},
                             {"target_module", nullptr}});  // not a name: none
  CHECK(comm.metadata == json{{"version", "2.1.0"}});
  REQUIRE(comm.buffers.size() == 1);
  CHECK(comm.buffers[0] == std::string("\x00\x01\x02", 3));
  CHECK(comm.size > 3);  // everything counts, buffers included
  // data and metadata that are not objects become empty ones
  auto plain = check_worker_comm("comm_msg", {{"comm_id", "c1"}, {"data", "x"}, {"metadata", 1}});
  REQUIRE(std::holds_alternative<WorkerComm>(plain));
  CHECK(std::get<WorkerComm>(plain).content["data"] == json::object());
  CHECK(std::get<WorkerComm>(plain).metadata == json::object());
}

TEST_CASE("a comm message's metadata keeps only a protocol version of digits and dots",
          "[worker_comms]") {
  CHECK(comm_metadata({{"version", "2.1.0"}}) == json{{"version", "2.1.0"}});
  CHECK(comm_metadata({{"version", "2"}}) == json{{"version", "2"}});
  CHECK(comm_metadata({{"version", "1.2.3.4"}}) == json{{"version", "1.2.3.4"}});
  // other keys never pass; another shape of version is left out, never repaired
  CHECK(comm_metadata({{"version", "2.1.0"}, {"html", "<img src=x onerror=alert(1)>"}}) ==
        json{{"version", "2.1.0"}});
  for (const char* bad : {"", ".", "2.", ".2", "2..1", "1.2.3.4.5", "1234567", "2.1.0-rc",
                          "2.1.0<script>", " 2", "v2"})
    CHECK(comm_metadata({{"version", bad}}) == json::object());
  CHECK(comm_metadata({{"version", 2}}) == json::object());
  CHECK(comm_metadata({{"other", "x"}}) == json::object());
  CHECK(comm_metadata("2.1.0") == json::object());
}

TEST_CASE("a worker's comm message that is not of the protocol's shape is refused",
          "[worker_comms]") {
  CHECK(refusal("comm_msg", json::object()) == "comm_msg without a usable comm_id");
  CHECK(refusal("comm_msg", {{"comm_id", ""}}) == "comm_msg without a usable comm_id");
  CHECK(refusal("comm_msg", {{"comm_id", std::string(257, 'x')}}) ==
        "comm_msg without a usable comm_id");
  CHECK(refusal("comm_close", {{"comm_id", 7}}) == "comm_close without a usable comm_id");
  CHECK(refusal("comm_open", {{"comm_id", "c"}}) == "comm_open without a usable target_name");
  CHECK(refusal("comm_msg", {{"comm_id", "c"}, {"buffers", "AAEC"}}).find("not a list") !=
        std::string::npos);
  CHECK(refusal("comm_msg", {{"comm_id", "c"}, {"buffers", json::array({"%%%"})}}) ==
        "comm_msg with a buffer that is not base64");
  CHECK(refusal("comm_msg", {{"comm_id", "c"}, {"buffers", json::array({1})}}) ==
        "comm_msg with a buffer that is not base64");
  json many = json::array();
  for (int i = 0; i < 1025; ++i) many.push_back("");
  CHECK(refusal("comm_msg", {{"comm_id", "c"}, {"buffers", many}}).find("at most 1024") !=
        std::string::npos);
  CHECK(refusal("comm_msg", {{"comm_id", "c"}, {"buffers", nullptr}}).empty());  // none
}

TEST_CASE("comm_info lists usable entries, and only what the page knows unless allowed",
          "[worker_comms]") {
  json frame = {{"comms",
                 {{"a", {{"target_name", "jupyter.widget"}}},
                  {"b", {{"target_name", 3}}},
                  {"c", "not an object"},
                  {std::string(300, 'x'), {{"target_name", "t"}}},
                  {"d", {{"target_name", "made.up"}}}}}};
  CHECK(checked_comm_list(frame) ==
        json{{"a", {{"target_name", "jupyter.widget"}}}, {"d", {{"target_name", "made.up"}}}});
  auto known = [](const std::string& id) { return id == "d" ? std::string("jupyter.widget") : ""; };
  CHECK(checked_comm_list(frame, known) == json{{"d", {{"target_name", "jupyter.widget"}}}});
  CHECK(checked_comm_list({{"comms", json::array()}}) == json::object());
  CHECK(checked_comm_list(json::object()) == json::object());
}

TEST_CASE("comm handlers share one budget a window at a time, a cell refills it",
          "[worker_comms]") {
  CommBudgetWindow window;
  CommBudgetWindow::Clock::time_point now{};
  OutputBudget budget = window.start_handler(now, 100);
  CHECK(budget.take_whole(80));
  window.handler_finished(budget);
  CHECK(window.tell_drops());
  CHECK_FALSE(window.tell_drops());  // once per window
  OutputBudget next = window.start_handler(now + 30s, 100);
  CHECK(next.room() == 20);  // the same window: what was spent stays spent
  CHECK_FALSE(next.take_whole(21));
  window.handler_finished(next);
  OutputBudget later = window.start_handler(now + 60s, 100);
  CHECK(later.room() == 100);  // a new window
  CHECK(window.tell_drops());
  later.take_whole(100);
  window.handler_finished(later);
  window.cell_started();
  CHECK(window.start_handler(now + 61s, 100).room() == 100);
}
