// The requests whose later output the worker may name: only those handed to it, the newest
// few hundred within a byte bound, headers alone.
#include "kernel/session/request_parents.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace belljar;

namespace {
WireMessage request(const std::string& msg_id, const std::string& code = "1 + 1") {
  WireMessage message;
  message.header = {{"msg_id", msg_id}, {"msg_type", "execute_request"}, {"session", "s"}};
  message.content = {{"code", code}};
  return message;
}
}  // namespace

TEST_CASE("a request handed over is found by its msg_id, header alone", "[request_parents]") {
  RequestParents parents;
  parents.remember(request("cell-1", std::string(1 << 20, 'x')));
  std::optional<WireMessage> found = parents.find("cell-1");
  REQUIRE(found);
  CHECK(found->header["msg_type"] == "execute_request");
  CHECK(found->content.empty());  // the code is not kept
  CHECK_FALSE(parents.find("cell-2"));
  CHECK_FALSE(parents.find(""));
}

TEST_CASE("a msg_id a client used twice names its newest request", "[request_parents]") {
  RequestParents parents;
  WireMessage first = request("same");
  first.header["session"] = "first";
  WireMessage second = request("same");
  second.header["session"] = "second";
  parents.remember(first);
  parents.remember(second);
  REQUIRE(parents.find("same"));
  CHECK(parents.find("same")->header["session"] == "second");
}

TEST_CASE("a request without a msg_id is not kept: nothing could name it", "[request_parents]") {
  RequestParents parents;
  parents.remember(request(""));
  CHECK(parents.size() == 0);
}

TEST_CASE("past the bound the oldest requests are forgotten first", "[request_parents]") {
  RequestParents parents;
  for (size_t i = 0; i < RequestParents::kMaxRequests + 10; ++i)
    parents.remember(request("cell-" + std::to_string(i)));
  CHECK(parents.size() == RequestParents::kMaxRequests);
  CHECK_FALSE(parents.find("cell-9"));
  CHECK(parents.find("cell-10"));
  CHECK(parents.find("cell-" + std::to_string(RequestParents::kMaxRequests + 9)));
}

TEST_CASE("huge headers are kept within the byte bound, the newest always", "[request_parents]") {
  RequestParents parents;
  for (int i = 0; i < 10; ++i) {
    WireMessage message = request("big-" + std::to_string(i));
    message.header["padding"] = std::string(RequestParents::kMaxBytes / 4, 'p');
    parents.remember(message);
  }
  CHECK(parents.size() < 4);
  CHECK(parents.find("big-9"));
  CHECK_FALSE(parents.find("big-0"));
}
