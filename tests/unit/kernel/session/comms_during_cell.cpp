// The comm messages that arrive while a cell runs: handed one at a time, in order; the worker's
// word accepted only for the one handed, begun before it ends; what a cell leaves, taken out.
#include "kernel/session/comms_during_cell.hpp"

#include <catch2/catch.hpp>

using namespace belljar;

namespace {
WireMessage message(const std::string& id) {
  WireMessage m;
  m.header = {{"msg_type", "comm_msg"}, {"msg_id", id}};
  return m;
}
}  // namespace

TEST_CASE("comm messages during a cell are handed one at a time, in the order they came",
          "[comms_during_cell]") {
  CommsDuringCell comms;
  CHECK_FALSE(comms.ready_to_hand());
  comms.arrive(message("c1"));
  comms.arrive(message("c2"));
  REQUIRE(comms.ready_to_hand());
  CHECK(comms.next().id() == "c1");
  comms.hand("r2");
  CHECK_FALSE(comms.ready_to_hand());  // c2 waits until the worker is done with c1
  CHECK(comms.running() == nullptr);
  REQUIRE(comms.begin("r2"));
  REQUIRE(comms.running() != nullptr);
  CHECK(comms.running()->id() == "c1");
  CHECK(comms.runs("r2"));
  auto finished = comms.finish("r2");
  REQUIRE(finished);
  CHECK(finished->id() == "c1");
  REQUIRE(comms.ready_to_hand());
  CHECK(comms.next().id() == "c2");
  comms.hand("r3");
  REQUIRE(comms.begin("r3"));
  REQUIRE(comms.finish("r3"));
  CHECK(comms.take_handled() == 2);
  CHECK(comms.take_handled() == 0);
}

TEST_CASE("the worker's word counts only for the message handed, begun once, then ended",
          "[comms_during_cell]") {
  CommsDuringCell comms;
  CHECK_FALSE(comms.begin("r1"));  // nothing handed
  comms.arrive(message("c1"));
  comms.hand("r1");
  CHECK_FALSE(comms.finish("r1"));  // ended before it began
  CHECK_FALSE(comms.runs("r1"));
  CHECK_FALSE(comms.begin("r0"));  // another id
  CHECK_FALSE(comms.begin(""));
  REQUIRE(comms.begin("r1"));
  CHECK_FALSE(comms.begin("r1"));   // a second begin
  CHECK_FALSE(comms.finish("r0"));  // another id
  REQUIRE(comms.finish("r1"));
  CHECK_FALSE(comms.finish("r1"));  // a second done
  CHECK_FALSE(comms.runs("r1"));
  CHECK(comms.take_handled() == 1);
}

TEST_CASE("a large comm message waits for the cell's end, and every one after it",
          "[comms_during_cell]") {
  CommsDuringCell comms;
  comms.arrive(message("big"));
  comms.arrive(message("small"));
  comms.hold_rest();
  CHECK_FALSE(comms.ready_to_hand());
  auto waiting = comms.take_waiting();
  REQUIRE(waiting.size() == 2);
  CHECK(waiting[0].id() == "big");
  CHECK(waiting[1].id() == "small");
  comms.arrive(message("next cell's"));  // a new cell hands again
  CHECK(comms.ready_to_hand());
}

TEST_CASE("what a cell leaves: the one handed, begun or not, and those still waiting",
          "[comms_during_cell]") {
  CommsDuringCell comms;
  comms.arrive(message("c1"));
  comms.arrive(message("c2"));
  comms.hand("r1");
  auto handed = comms.take_handed();
  REQUIRE(handed);
  CHECK(handed->request.id() == "c1");
  CHECK(handed->id == "r1");
  CHECK_FALSE(handed->begun);
  CHECK_FALSE(comms.take_handed());
  CHECK_FALSE(comms.runs("r1"));  // its frames are no longer a handler's during the cell
  auto waiting = comms.take_waiting();
  REQUIRE(waiting.size() == 1);
  CHECK(waiting[0].id() == "c2");
  CHECK_FALSE(comms.ready_to_hand());
}
