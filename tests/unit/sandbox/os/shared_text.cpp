// The small text helpers the supervisor and the sandbox share (sandbox/os/host_port.hpp,
// sandbox/os/search_path.hpp, sandbox/policy/json_field.hpp): one behaviour for all callers.
#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "sandbox/os/host_port.hpp"
#include "sandbox/os/search_path.hpp"
#include "sandbox/policy/json_field.hpp"

using namespace belljar;

TEST_CASE("host_port brackets an IPv6 literal once", "[os][host_port]") {
  CHECK(host_port("example.com", 443) == "example.com:443");
  CHECK(host_port("127.0.0.1", 8888) == "127.0.0.1:8888");
  CHECK(host_port("::1", 8888) == "[::1]:8888");
  CHECK(host_port("[::1]", 8888) == "[::1]:8888");  // already bracketed: kept as it is
  CHECK(bracketed_host("fe80::1") == "[fe80::1]");
  CHECK(bracketed_host("example.com") == "example.com");
}

TEST_CASE("a search path splits at every colon and keeps empty entries", "[os][search_path]") {
  CHECK(split_search_path("/usr/bin:/bin") == std::vector<std::string>{"/usr/bin", "/bin"});
  CHECK(split_search_path("") == std::vector<std::string>{""});
  CHECK(split_search_path(":/bin:") == std::vector<std::string>{"", "/bin", ""});
  CHECK(join_search_path({"/a", "/b"}) == "/a:/b");
  CHECK(join_search_path(split_search_path("/x:/y:/z")) == "/x:/y:/z");
}

TEST_CASE("json_field returns the fallback for a field of another type, never throws",
          "[policy][json_field]") {
  auto doc = nlohmann::json::parse(
      R"({"event": 7, "name": "ready", "pid": 42, "big": 9999999999, "neg": -1,
          "flag": true, "cpu": 1.5, "list": [1]})");
  CHECK(json_field(doc, "event", "") == "");  // nlohmann's value() throws here
  CHECK_THROWS(doc.value("event", ""));
  CHECK(json_field(doc, "name", "") == "ready");
  CHECK(json_field(doc, "missing", "dflt") == "dflt");
  CHECK(json_field<int>(doc, "pid", -1) == 42);
  CHECK(json_field<int>(doc, "big", -1) == -1);  // does not fit an int
  CHECK(json_field<int64_t>(doc, "big", -1) == 9999999999);
  CHECK(json_field<uint64_t>(doc, "neg", 0) == 0);  // negative: not an unsigned
  CHECK(json_field<int>(doc, "name", -1) == -1);
  CHECK(json_field(doc, "flag", false) == true);
  CHECK(json_field(doc, "pid", false) == false);
  CHECK(json_field(doc, "cpu", -1.0) == 1.5);
  CHECK(json_field(doc, "list", -1.0) == -1.0);
  CHECK(json_field(nlohmann::json::array(), "name", "x") == "x");  // not an object
}
