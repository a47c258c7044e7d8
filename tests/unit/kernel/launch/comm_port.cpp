// The comm port's requests: what each asks of the kernel, and that nothing malformed asks
// anything. And the launch's port ranges.
#include "kernel/launch/comm_port.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <vector>

#include "kernel/protocol/port_range.hpp"
#include "usage_error.hpp"

using namespace belljar;

TEST_CASE("a comm port request asks for an interrupt, a shutdown or nothing", "[launch]") {
  struct Row {
    const char* body;
    GatewayAction action;
    const char* why;  // "" when well-formed
  };
  const Row rows[] = {
      {R"({"signum": 0})", GatewayAction::none, ""},  // the liveness poll
      {R"({"signum": 2})", GatewayAction::interrupt, ""},
      {R"({"signum": "2"})", GatewayAction::interrupt,
       ""},  // int(signum), as the listeners read it
      {R"({"signum": 15})", GatewayAction::shutdown, ""},
      {R"({"signum": 9})", GatewayAction::shutdown, ""},
      {R"({"signum": 1})", GatewayAction::shutdown, ""},
      {R"({"signum": 17})", GatewayAction::none, ""},  // SIGCHLD: ignored by default
      {R"({"signum": 28})", GatewayAction::none, ""},  // SIGWINCH
      {R"({"shutdown": 1})", GatewayAction::shutdown, ""},
      {R"({"shutdown": true})", GatewayAction::shutdown, ""},
      {R"({"shutdown": 0})", GatewayAction::none, ""},
      {R"({"signum": 0, "shutdown": 1})", GatewayAction::shutdown, ""},
      {"not json", GatewayAction::none, "not a JSON object"},
      {"[2]", GatewayAction::none, "not a JSON object"},
      {R"({"other": 2})", GatewayAction::none, R"(neither "signum" nor "shutdown")"},
      {R"({"signum": -1})", GatewayAction::none, R"("signum" is not a signal number)"},
      {R"({"signum": 999})", GatewayAction::none, R"("signum" is not a signal number)"},
      {R"({"signum": "2; rm -rf /"})", GatewayAction::none, R"("signum" is not a signal number)"},
      {R"({"signum": 2.5})", GatewayAction::none, R"("signum" is not a signal number)"},
      {R"({"shutdown": "yes"})", GatewayAction::none, R"("shutdown" is not a number or a boolean)"},
  };
  for (const Row& row : rows) {
    INFO(row.body);
    std::string why;
    CHECK(parse_gateway_request(row.body, &why) == row.action);
    CHECK(why == row.why);
  }
}

TEST_CASE("a port range is LO..HI with room for six ports, or 0..0 for any", "[launch]") {
  CHECK(parse_port_range("0..0", "--port-range").any());
  auto range = parse_port_range("40000..40100", "--port-range");
  CHECK((range.lo == 40000 && range.hi == 40100 && !range.any()));
  CHECK(parse_port_range("40000-40005", "--port-range").hi == 40005);
  using belljar::testing::usage_error;
  auto error = [](const char* text) {
    return usage_error([&] { parse_port_range(text, "--port-range"); });
  };
  CHECK(error("40000") == "--port-range 40000: expected LO..HI (0..0 for any port)");
  CHECK(error("a..b").find("expected LO..HI with ports from 0 to 65535") != std::string::npos);
  CHECK(error("40000..70000").find("from 0 to 65535") != std::string::npos);
  CHECK(error("41000..40000") ==
        "--port-range 41000..40000: the lower port is above the upper one");
  CHECK(error("80..2000").find("below 1024 are privileged") != std::string::npos);
  CHECK(error("40000..40004") ==
        "--port-range 40000..40004: a kernel needs 6 ports (five channels and the comm port)");
}

TEST_CASE("binding within a range tries each port once, then says the range is full", "[launch]") {
  PortRange range{40000, 40009};
  std::vector<uint16_t> tried;
  std::string error = belljar::testing::usage_error([&] {
    bind_in_range(
        range, [&](uint16_t port) { return tried.push_back(port), false; }, "the shell channel");
  });
  CHECK(error == "cannot bind the shell channel: every port of --port-range 40000..40009 is taken");
  std::sort(tried.begin(), tried.end());
  CHECK(tried == std::vector<uint16_t>{40000, 40001, 40002, 40003, 40004, 40005, 40006, 40007,
                                       40008, 40009});
  uint16_t bound = 0;
  bind_in_range(
      range, [&](uint16_t port) { return port == 40007 ? (bound = port, true) : false; }, "x");
  CHECK(bound == 40007);
  std::vector<uint16_t> any;
  bind_in_range(
      PortRange{}, [&](uint16_t port) { return any.push_back(port), true; }, "x");
  CHECK(any == std::vector<uint16_t>{0});
}
