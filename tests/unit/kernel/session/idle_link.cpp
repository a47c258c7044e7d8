// The idle link alone, through fake doors and a fake core: only output comes between requests;
// with no request running it is shown under the last cell on the budget of output between
// requests, and told once a window past it, after the pipes' text; while a request runs it is
// handed to the core as that request's; output naming an earlier request goes under it on the
// budget between requests, never the running request's; output naming the running request is
// its own, after the pipes' text; output naming a request never given goes where output naming
// nothing goes. Only executes and comm messages may be named later; only an execute is the last
// cell.
#include "kernel/session/idle_link.hpp"

#include <catch2/catch.hpp>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

namespace {

// The core as the idle link sees it: a request it may say runs, and what it was asked to do.
class FakeCore final : public IdleLink::Core {
 public:
  FakeCore() { budget.reset(1 << 20); }
  const WireMessage* running() const override { return runs ? &request : nullptr; }
  const WireMessage* served() const override { return runs ? &request : nullptr; }
  void take_output(WorkerFrame type, const json&) override { taken.push_back(type); }
  OutputBudget& running_budget() override { return budget; }
  void show_pipes() override { ++pipes_shown; }

  bool runs = false;
  WireMessage request = testing::request("execute_request", "running");
  OutputBudget budget;
  std::vector<WorkerFrame> taken;
  int pipes_shown = 0;
};

struct Rig {
  explicit Rig(uint64_t limit = 1 << 20) : link(client, checks, log, core, limit) {}
  FakeClient client;
  Redactor redactor;
  OutputChecks checks{redactor, ActiveOutput::allow};
  RateLimitedLog log{10};
  FakeCore core;
  IdleLink link;
};

json display(const std::string& text) {
  return {{"data", {{"text/plain", text}}}, {"idle", true}};
}

json stream_naming(const std::string& parent, const std::string& text = "hi") {
  return {{"name", "stdout"}, {"text", text}, {"parent", parent}};
}

}  // namespace

TEST_CASE("idle link: only output comes between requests", "[idle_link]") {
  Rig rig;
  for (WorkerFrame type : {WorkerFrame::result, WorkerFrame::error, WorkerFrame::done,
                           WorkerFrame::input_request, WorkerFrame::limits})
    rig.link.on_idle_frame(type, {{"idle", true}, {"data", {{"text/plain", "x"}}}});
  rig.core.runs = true;
  rig.link.on_idle_frame(WorkerFrame::done, {{"idle", true}});
  CHECK(rig.client.sent.empty());
  CHECK(rig.core.taken.empty());
}

TEST_CASE("idle link: between requests, output goes under the last cell on its own budget",
          "[idle_link]") {
  Rig rig;
  rig.link.on_idle_frame(WorkerFrame::display, display("before any cell"));
  REQUIRE(rig.client.of("display_data").size() == 1);
  CHECK(rig.client.of("display_data")[0].parent == "");
  rig.link.handed(request("execute_request", "cell-1"), RequestKind::execute);
  rig.link.handed(request("complete_request", "lookup"), RequestKind::complete);
  rig.link.handed(request("comm_msg", "comm"), RequestKind::comm);
  REQUIRE(rig.link.last_cell() != nullptr);
  CHECK(rig.link.last_cell()->id() == "cell-1");  // only an execute is the last cell
  rig.link.on_idle_frame(WorkerFrame::display, display("tick"));
  rig.link.on_idle_frame(WorkerFrame::clear_output, {{"idle", true}, {"wait", true}});
  rig.link.on_idle_frame(
      WorkerFrame::comm_open,
      {{"idle", true}, {"comm_id", "c1"}, {"target_name", "t"}, {"data", json::object()}});
  REQUIRE(rig.client.sent.size() == 4);
  for (size_t i = 1; i < 4; ++i) CHECK(rig.client.sent[i].parent == "cell-1");
  CHECK(rig.link.budget(IdleLink::Clock::now()).used() > 0);
  CHECK(rig.core.budget.used() == 0);
  CHECK(rig.core.taken.empty());
}

TEST_CASE("idle link: while a request runs, output naming none is that request's", "[idle_link]") {
  Rig rig;
  rig.core.runs = true;
  rig.link.on_idle_frame(WorkerFrame::display, display("x"));
  rig.link.on_idle_frame(WorkerFrame::clear_output, {{"idle", true}});
  rig.link.on_idle_frame(WorkerFrame::comm_msg, {{"idle", true}, {"comm_id", "c1"}});
  rig.link.on_idle_frame(WorkerFrame::stream, {{"idle", true}, {"name", "stdout"}, {"text", "x"}});
  CHECK(rig.core.taken == std::vector<WorkerFrame>{WorkerFrame::display, WorkerFrame::clear_output,
                                                   WorkerFrame::comm_msg});
  CHECK(rig.client.sent.empty());  // the core publishes the request's own; a bare stream is dropped
}

TEST_CASE("idle link: output naming an earlier request goes under it, not on the running budget",
          "[idle_link]") {
  Rig rig;
  rig.link.handed(request("execute_request", "cell-1"), RequestKind::execute);
  rig.link.handed(request("comm_msg", "comm-1"), RequestKind::comm);
  rig.core.runs = true;
  rig.link.on_parented_output(WorkerFrame::stream, stream_naming("cell-1", "from a task"));
  json shown = display("late");
  shown["parent"] = "comm-1";
  rig.link.on_parented_output(WorkerFrame::display, shown);
  REQUIRE(rig.client.sent.size() == 2);
  CHECK(rig.client.sent[0].parent == "cell-1");
  CHECK(rig.client.sent[0].content["text"] == "from a task");
  CHECK(rig.client.sent[1].parent == "comm-1");
  CHECK(rig.core.budget.used() == 0);
  CHECK(rig.link.budget(IdleLink::Clock::now()).used() > 0);
}

TEST_CASE("idle link: output naming the running request is its own, after the pipes' text",
          "[idle_link]") {
  Rig rig;
  rig.link.handed(rig.core.request, RequestKind::execute);
  rig.core.runs = true;
  rig.link.on_parented_output(WorkerFrame::stream, stream_naming("running"));
  REQUIRE(rig.client.of("stream").size() == 1);
  CHECK(rig.client.of("stream")[0].parent == "running");
  CHECK(rig.core.pipes_shown == 1);
  CHECK(rig.core.budget.used() == 2);
  CHECK(rig.link.budget(IdleLink::Clock::now()).used() == 0);
  json shown = display("mine");
  shown["parent"] = "running";
  rig.link.on_parented_output(WorkerFrame::display, shown);
  CHECK(rig.core.taken == std::vector<WorkerFrame>{WorkerFrame::display});
}

TEST_CASE("idle link: output naming a request never given goes where output naming none goes",
          "[idle_link]") {
  Rig rig;
  rig.link.handed(request("execute_request", "cell-1"), RequestKind::execute);
  rig.link.on_parented_output(WorkerFrame::stream, stream_naming("forged"));
  REQUIRE(rig.client.of("stream").size() == 1);
  CHECK(rig.client.of("stream")[0].parent == "cell-1");
  rig.link.handed(request("complete_request", "lookup"), RequestKind::complete);
  rig.link.on_parented_output(WorkerFrame::stream, stream_naming("lookup"));  // never kept
  CHECK(rig.client.of("stream").size() == 2);
  CHECK(rig.client.of("stream")[1].parent == "cell-1");
  rig.core.runs = true;
  rig.link.on_parented_output(WorkerFrame::stream, stream_naming("forged"));
  REQUIRE(rig.client.of("stream").size() == 3);
  CHECK(rig.client.of("stream")[2].parent == "running");
  CHECK(rig.core.budget.used() == 2);
}

TEST_CASE("idle link: past its budget, output between requests is withheld and told once",
          "[idle_link]") {
  Rig rig(200);
  rig.link.handed(request("execute_request", "cell-1"), RequestKind::execute);
  for (int i = 0; i < 5; ++i)
    rig.link.on_idle_frame(WorkerFrame::display, display(std::string(40, 'x')));
  auto displays = rig.client.of("display_data");
  CHECK(displays.size() >= 1);
  CHECK(displays.size() < 5);
  auto notices = rig.client.of("stream");
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].parent == "cell-1");
  CHECK(notices[0].content["name"] == "stderr");
  CHECK(rig.core.pipes_shown == 1);  // what was read before it comes first
  rig.link.tell_withheld();
  CHECK(rig.client.of("stream").size() == 1);
}
