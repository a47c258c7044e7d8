#include "kernel/session/checkpoints.hpp"

#include <catch2/catch.hpp>

using belljar::Checkpoints;
using json = nlohmann::json;

namespace {

Checkpoints::Facts in_cell(int count) {
  Checkpoints::Facts facts;
  facts.in_cell = true;
  facts.execution_count = count;
  return facts;
}

json ask(Checkpoints& table, const std::string& op, const std::string& name, int count = 1) {
  return table.ask({{"type", "checkpoint_request"}, {"op", op}, {"name", name}}, in_cell(count));
}

// A checkpoint made and its cell ended well: its handle.
std::string made(Checkpoints& table, const std::string& name, int count) {
  json reply = ask(table, "make", name, count);
  REQUIRE_FALSE(reply.contains("error"));
  table.settle(true);
  return reply["handle"];
}

}  // namespace

TEST_CASE("a checkpoint is kept once its cell ends well, under an unguessable handle",
          "[checkpoints]") {
  Checkpoints table(4);
  json reply = ask(table, "make", "before", 3);
  CHECK(reply["type"] == "checkpoint_reply");
  std::string handle = reply["handle"];
  CHECK(handle.size() == 37);
  CHECK(handle.rfind("ckpt_", 0) == 0);
  CHECK(table.entries().empty());  // not before the cell ends
  Checkpoints::Settled settled = table.settle(true);
  CHECK(settled.facts["op"] == "make");
  CHECK(settled.facts["checkpoint"] == handle);
  CHECK(settled.facts["execution_count"] == 3);
  CHECK_FALSE(settled.execution_count);
  REQUIRE(table.entries().size() == 1);
  CHECK(table.entries()[0].name == "before");
  // Another one's handle is another: never derived from the name or the count.
  Checkpoints other(4);
  CHECK(made(other, "before", 3) != handle);
}

TEST_CASE("a checkpoint whose cell failed is not kept", "[checkpoints]") {
  Checkpoints table(4);
  ask(table, "make", "x");
  CHECK(table.settle(false).facts["ok"] == false);
  CHECK(table.entries().empty());
}

TEST_CASE("a rollback returns the checkpoint's execution count when its cell ends well",
          "[checkpoints]") {
  Checkpoints table(4);
  std::string first = made(table, "first", 2);
  made(table, "second", 5);
  json reply = ask(table, "rollback", "first", 9);
  CHECK(reply["handle"] == first);
  Checkpoints::Settled settled = table.settle(true);
  REQUIRE(settled.execution_count);
  CHECK(*settled.execution_count == 2);
  CHECK(table.entries().size() == 2);  // both stay: a checkpoint can be returned to again
  // By handle, and without a name: the newest.
  CHECK(ask(table, "rollback", first)["handle"] == first);
  table.settle(true);
  CHECK(ask(table, "rollback", "")["handle"] == table.entries().back().handle);
  table.settle(true);
}

TEST_CASE("a rollback that failed keeps the checkpoint, unless its process is gone",
          "[checkpoints]") {
  Checkpoints table(4);
  std::string interrupted = made(table, "interrupted", 1);
  std::string gone = made(table, "gone", 2);
  ask(table, "rollback", "interrupted");
  CHECK_FALSE(table.settle(false).execution_count);
  CHECK(table.entries().size() == 2);
  // The worker found the process gone: it says so, and the rollback's cell fails.
  ask(table, "rollback", "gone");
  CHECK(ask(table, "forget", gone) == json{{"type", "checkpoint_reply"}});
  Checkpoints::Settled settled = table.settle(false);
  CHECK(settled.facts["op"] == "rollback");
  CHECK_FALSE(settled.execution_count);
  REQUIRE(table.entries().size() == 1);
  CHECK(table.entries()[0].handle == interrupted);
}

TEST_CASE("past the bound the oldest checkpoint is dropped with a notice", "[checkpoints]") {
  Checkpoints table(2);
  std::string oldest = made(table, "a", 1);
  made(table, "b", 2);
  json reply = ask(table, "make", "c", 3);
  CHECK(reply["drop"] == json::array({oldest}));
  CHECK(reply["text"].get<std::string>().find("the oldest, 'a', was dropped") != std::string::npos);
  table.settle(true);
  REQUIRE(table.entries().size() == 2);
  CHECK(table.entries()[0].name == "b");
  CHECK(table.entries()[1].name == "c");
}

TEST_CASE("what a checkpoint request is refused for, and that a refusal changes nothing",
          "[checkpoints]") {
  Checkpoints table(3);
  std::string kept = made(table, "kept", 1);
  auto refused = [&](const json& reply) {
    CHECK(reply.contains("error"));
    CHECK(table.settle(true).facts.is_null());
    REQUIRE(table.entries().size() == 1);
    CHECK(table.entries()[0].handle == kept);
  };
  refused(ask(table, "make", "kept"));               // a name in use
  refused(ask(table, "make", "two words"));          // not a name's shape
  refused(ask(table, "make", "ckpt_lookslikeone"));  // the handles' prefix
  refused(ask(table, "make", std::string(65, 'x')));
  refused(ask(table, "rollback", "nothing-so-named"));
  refused(ask(table, "rollback", "ckpt_00000000000000000000000000000000"));
  refused(ask(table, "drop", "nothing-so-named"));
  refused(ask(table, "teleport", "kept"));
  refused(table.ask({{"op", 7}, {"name", json::array()}}, in_cell(1)));
  Checkpoints::Facts comm_handler;  // not a cell
  refused(table.ask({{"op", "make"}, {"name", "x"}}, comm_handler));
  Checkpoints::Facts debugging = in_cell(1);
  debugging.refusal = "a debug session is started";
  json reply = table.ask({{"op", "rollback"}, {"name", "kept"}}, debugging);
  CHECK(reply["error"] == "a debug session is started");
  refused(reply);
  // Listing and dropping are never refused for the session's state.
  CHECK_FALSE(table.ask({{"op", "list"}, {"name", ""}}, debugging).contains("error"));
  table.settle(true);
}

TEST_CASE("checkpoints off refuse making and rolling back", "[checkpoints]") {
  Checkpoints table(0);
  CHECK(ask(table, "make", "x")["error"] ==
        "checkpoints are off in this session (--checkpoints 0)");
  CHECK(ask(table, "list", "")["text"] == "no checkpoints in this session");
}

TEST_CASE("dropping and listing checkpoints", "[checkpoints]") {
  Checkpoints table(4);
  std::string a = made(table, "a", 1);
  made(table, "", 2);  // a default name
  json listed = ask(table, "list", "");
  REQUIRE(listed["checkpoints"].size() == 2);
  CHECK(listed["checkpoints"][1]["name"] == "cp1");
  Checkpoints::Settled settled = table.settle(true);
  CHECK(settled.facts["op"] == "list");
  CHECK(settled.facts["checkpoints"].size() == 2);
  json dropped = ask(table, "drop", a);
  CHECK(dropped["drop"] == json::array({a}));
  CHECK(table.settle(true).facts["name"] == "a");
  REQUIRE(table.entries().size() == 1);
  table.forget_all();
  CHECK(table.entries().empty());
}

TEST_CASE("the shapes a checkpoint name or reference may take", "[checkpoints]") {
  CHECK(Checkpoints::valid_name("before-cleanup_2.v1"));
  for (std::string bad : std::vector<std::string>{"", "a b", "x\nimport os", "a;b", "ü", "ckpt_x",
                                                  std::string(65, 'a')})
    CHECK_FALSE(Checkpoints::valid_name(bad));
  CHECK(Checkpoints::valid_reference("ckpt_0123456789abcdef0123456789abcdef"));
  CHECK_FALSE(Checkpoints::valid_reference("ckpt_0123456789ABCDEF0123456789abcdef"));
  CHECK_FALSE(Checkpoints::valid_reference("ckpt_0123 456789abcdef0123456789abcde"));
  CHECK(Checkpoints::valid_reference("name"));
}
