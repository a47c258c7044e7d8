// The requests waiting for the worker: in the order they came, a kernel_info that waits for
// hello ahead of them, and stop_on_error taking out only the queued executes.
#include "kernel/session/request_queue.hpp"

#include <catch2/catch.hpp>

using namespace belljar;

namespace {
WireMessage message(const std::string& type, const std::string& id) {
  WireMessage m;
  m.header = {{"msg_type", type}, {"msg_id", id}};
  return m;
}
}  // namespace

TEST_CASE("requests wait in the order they came, a control request waiting for hello first",
          "[request_queue]") {
  RequestQueue queue;
  CHECK(queue.empty());
  queue.push_shell(message("execute_request", "1"));
  queue.push_shell(message("complete_request", "2"));
  queue.push_control_first(message("kernel_info_request", "k"));
  CHECK(queue.front().channel == Channel::control);
  CHECK(queue.take_front().message.id() == "k");
  CHECK(queue.take_front().message.id() == "1");
  CHECK(queue.take_front().message.id() == "2");
  CHECK(queue.empty());
}

TEST_CASE("stop_on_error takes out the queued executes and keeps the rest in order",
          "[request_queue]") {
  RequestQueue queue;
  queue.push_shell(message("execute_request", "e1"));
  queue.push_shell(message("inspect_request", "i1"));
  queue.push_shell(message("execute_request", "e2"));
  queue.push_shell(message("comm_msg", "c1"));
  queue.push_control_first(message("kernel_info_request", "k"));
  auto aborted = queue.take_executes();
  REQUIRE(aborted.size() == 2);
  CHECK(aborted[0].id() == "e1");
  CHECK(aborted[1].id() == "e2");
  CHECK(queue.take_front().message.id() == "k");
  CHECK(queue.take_front().message.id() == "i1");
  CHECK(queue.take_front().message.id() == "c1");
  CHECK(queue.empty());
  CHECK(queue.take_executes().empty());
}

TEST_CASE("comm messages a cell left go back to the front, in their order", "[request_queue]") {
  RequestQueue queue;
  queue.push_shell(message("execute_request", "e1"));
  CHECK_FALSE(queue.holds_comm());
  std::deque<WireMessage> left;
  left.push_back(message("comm_msg", "c1"));
  left.push_back(message("comm_close", "c2"));
  queue.push_shell_first(std::move(left));
  CHECK(queue.holds_comm());
  CHECK(queue.take_front().message.id() == "c1");
  CHECK(queue.take_front().message.id() == "c2");
  CHECK(queue.take_front().message.id() == "e1");
  CHECK(queue.empty());
}
