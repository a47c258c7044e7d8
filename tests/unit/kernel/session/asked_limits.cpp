// %%limits, decided alone: tighter than the policy is granted, looser or malformed is refused
// naming the option, and the worker's text goes through the command line's grammar.
#include "kernel/session/asked_limits.hpp"

#include <catch2/catch.hpp>

using namespace belljar;
using json = nlohmann::json;

namespace {
Policy policy() {
  Policy p;
  p.timeout_seconds = 60;
  p.cpu_seconds = 30;
  p.memory_bytes = 1ull << 30;
  p.output_limit_bytes = 10ull << 20;
  return p;
}
std::string refusal(const json& frame) {
  auto decided = decide_asked_limits(frame, policy());
  auto* why = std::get_if<std::string>(&decided);
  return why ? *why : "";
}
}  // namespace

TEST_CASE("%%limits tighter than the policy is granted, in the command line's grammar",
          "[asked_limits]") {
  auto decided = decide_asked_limits(
      {{"id", "1"}, {"timeout", "2"}, {"cpu", "500ms"}, {"output_limit", "1K"}, {"memory", 256}},
      policy());
  REQUIRE(std::holds_alternative<AskedLimits>(decided));
  const AskedLimits& asked = std::get<AskedLimits>(decided);
  CHECK(asked.timeout == 2.0);
  CHECK(asked.cpu == 0.5);
  CHECK(asked.output == 1024u);
  CHECK(asked.memory == 256u);  // a JSON number is read as its plain decimal text
  auto none = decide_asked_limits({{"id", "1"}}, policy());
  REQUIRE(std::holds_alternative<AskedLimits>(none));
  CHECK_FALSE(std::get<AskedLimits>(none).timeout);
  CHECK_FALSE(std::get<AskedLimits>(none).memory);
}

TEST_CASE("%%limits looser than the policy, or malformed, is refused naming the option",
          "[asked_limits]") {
  CHECK(refusal({{"timeout", "90"}}) ==
        "--timeout 90 asks for more than this kernel's policy allows (60 s)");
  CHECK(refusal({{"cpu", "31"}}) ==
        "--cpu 31 asks for more than this kernel's policy allows (30 s)");
  CHECK(refusal({{"output_limit", "11M"}}).find("--output-limit 11.0 MiB asks for more") == 0);
  CHECK(refusal({{"memory", "2G"}}).find("--memory 2.0 GiB asks for more") == 0);
  CHECK(refusal({{"memory", "lots"}}).find("--memory lots") == 0);
  CHECK(refusal({{"timeout", json::array()}}) ==
        "--timeout: expected the option's text, as written after it");
  // the first problem is the one said
  CHECK(refusal({{"timeout", "bad"}, {"memory", "2G"}}).find("--timeout bad") == 0);
  CHECK(refusal({{"timeout", "-1"}}).find("--timeout -1") == 0);
}
