// Which frame answers which request: the comm messages join the shell requests.
#include "kernel/session/request_kind.hpp"

#include <catch2/catch.hpp>

using namespace belljar;

TEST_CASE("the three comm messages are one request kind, answered by done", "[request_kind]") {
  for (const char* type : {"comm_open", "comm_msg", "comm_close"}) {
    REQUIRE(request_kind(type) == RequestKind::comm);
  }
  CHECK(worker_request(RequestKind::comm) == "comm");
  CHECK(worker_answer(RequestKind::comm) == "done");
  CHECK(request_kind("comm_info_request") == RequestKind::comm_info);
  CHECK(worker_answer(RequestKind::comm_info) == "comm_info_reply");
  CHECK(request_kind("execute_request") == RequestKind::execute);
  CHECK_FALSE(request_kind("kernel_info_request"));
  CHECK_FALSE(request_kind("comm_info_reply"));
}
