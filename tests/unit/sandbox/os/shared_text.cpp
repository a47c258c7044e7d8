// The small text helpers the supervisor and the sandbox share (sandbox/os/host_port.hpp,
// sandbox/os/search_path.hpp): one behaviour for all callers.
#include <catch2/catch.hpp>

#include "sandbox/os/host_port.hpp"
#include "sandbox/os/search_path.hpp"

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
