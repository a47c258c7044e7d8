// Policy value parsers: sizes, durations, host rules, isolation modes.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "sandbox/policy/policy.hpp"
#include "usage_error.hpp"

using namespace belljar;
using belljar::testing::usage_error;

TEST_CASE("sizes accept plain bytes and K/M/G/T suffixes", "[policy][size]") {
  CHECK(parse_size("--memory", "4096") == 4096);
  CHECK(parse_size("--memory", "512M") == 512ull << 20);
  CHECK(parse_size("--memory", "1G") == 1ull << 30);
  CHECK(parse_size("--memory", "1.5G") == 3ull << 29);
  CHECK(parse_size("--memory", "64k") == 64ull << 10);
  CHECK(parse_size("--memory", "2T") == 2ull << 40);
  CHECK(parse_size("--memory", "512MB") == 512ull << 20);
  CHECK(parse_size("--memory", "512MiB") == 512ull << 20);
  CHECK(parse_size("--memory", "1g") == 1ull << 30);
}

TEST_CASE("bad sizes are refused naming the flag and the value", "[policy][size]") {
  for (const char* bad :
       {"12Q", "-1", "", "M", "abc", "+5M", "1.5.5G", "nan", "inf", "1GG", "1iB"}) {
    INFO("value: " << bad);
    auto why = usage_error([&] { parse_size("--memory", bad); });
    CHECK_THAT(why, Catch::StartsWith(std::string("--memory ") + bad + ":"));
  }
  CHECK_THAT(usage_error([] { parse_size("--tmp-size", "0"); }), Catch::Contains("out of range"));
  CHECK_THAT(usage_error([] { parse_size("--tmp-size", "100000000T"); }),
             Catch::Contains("out of range"));
}

TEST_CASE("durations accept seconds, ms, m and h", "[policy][duration]") {
  CHECK(parse_duration("--timeout", "30") == Approx(30));
  CHECK(parse_duration("--timeout", "1.5s") == Approx(1.5));
  CHECK(parse_duration("--timeout", "2m") == Approx(120));
  CHECK(parse_duration("--timeout", "1h") == Approx(3600));
  CHECK(parse_duration("--timeout", "250ms") == Approx(0.25));
}

TEST_CASE("bad durations are refused naming the flag and the value", "[policy][duration]") {
  for (const char* bad : {"", "soon", "-5", "+5", "5x", "5 s", "1d", "nan", "inf", "s"}) {
    INFO("value: " << bad);
    auto why = usage_error([&] { parse_duration("--timeout", bad); });
    CHECK_THAT(why, Catch::StartsWith(std::string("--timeout ") + bad + ":"));
  }
  CHECK_THAT(usage_error([] { parse_duration("--cpu", "0"); }), Catch::Contains("out of range"));
  CHECK_THAT(usage_error([] { parse_duration("--cpu", "1ms"); }), Catch::Contains("out of range"));
  CHECK_THAT(usage_error([] { parse_duration("--cpu", "169h"); }), Catch::Contains("out of range"));
}

TEST_CASE("host rule without a port allows 80 and 443", "[policy][net]") {
  auto rule = parse_host_rule("--allow-net", "example.com");
  CHECK(rule.host == "example.com");
  CHECK(rule.ports == std::vector<uint16_t>{80, 443});
  CHECK(rule.text() == "example.com");
}

TEST_CASE("host rule forms: wildcard, IPv4, IPv6, ports", "[policy][net]") {
  auto wildcard = parse_host_rule("--allow-net", "*.example.com:8443");
  CHECK(wildcard.host == "*.example.com");
  CHECK(wildcard.ports == std::vector<uint16_t>{8443});
  CHECK(wildcard.text() == "*.example.com:8443");

  auto v6 = parse_host_rule("--allow-net", "[::1]:8080");
  CHECK(v6.host == "::1");
  CHECK(v6.ports == std::vector<uint16_t>{8080});
  CHECK(v6.text() == "[::1]:8080");

  auto v6_bare = parse_host_rule("--allow-net", "2001:db8::1");
  CHECK(v6_bare.host == "2001:db8::1");
  CHECK(v6_bare.ports == std::vector<uint16_t>{80, 443});

  auto v6_no_port = parse_host_rule("--allow-net", "[::1]");
  CHECK(v6_no_port.host == "::1");
  CHECK(v6_no_port.ports == std::vector<uint16_t>{80, 443});

  auto v4 = parse_host_rule("--allow-net", "10.0.0.5");
  CHECK(v4.host == "10.0.0.5");
  CHECK(v4.ports == std::vector<uint16_t>{80, 443});

  auto edge = parse_host_rule("--allow-net", "pypi.org:1");
  CHECK(edge.ports == std::vector<uint16_t>{1});
  CHECK(parse_host_rule("--allow-net", "pypi.org:65535").ports == std::vector<uint16_t>{65535});
}

TEST_CASE("host rule names are lower-cased", "[policy][net]") {
  CHECK(parse_host_rule("--allow-net", "PyPI.ORG").host == "pypi.org");
  CHECK(parse_host_rule("--allow-net", "*.Example.COM:443").host == "*.example.com");
}

TEST_CASE("bad host rules are refused naming the flag and the value", "[policy][net]") {
  for (const char* bad : {"exa mple.com",
                          ":80",
                          "",
                          "host:",
                          "[::1",
                          "[]",
                          "[::1]x",
                          "[::1]:",
                          "*",
                          "*.",
                          "a..b",
                          ".example.com",
                          "example.com.",
                          "ex_ample.com",
                          "foo.*.com",
                          "http://example.com",
                          "example.com/path",
                          "[example.com]:80",
                          "user@example.com",
                          "host:80:90x"}) {
    INFO("value: " << bad);
    auto why = usage_error([&] { parse_host_rule("--allow-net", bad); });
    CHECK_THAT(why, Catch::StartsWith(std::string("--allow-net ") + bad + ":"));
  }
  for (const char* bad_port :
       {"host:0", "host:99999", "host:65536", "host:-1", "host:+80", "host:80x", "[::1]:0"}) {
    INFO("value: " << bad_port);
    CHECK_THAT(usage_error([&] { parse_host_rule("--allow-net", bad_port); }),
               Catch::Contains("port must be 1 to 65535"));
  }
  std::string too_long(254, 'a');
  CHECK_FALSE(usage_error([&] { parse_host_rule("--allow-net", too_long); }).empty());
}

TEST_CASE("isolation modes parse and print back", "[policy]") {
  for (auto mode : {Isolation::strict, Isolation::degraded, Isolation::none})
    CHECK(parse_isolation(isolation_name(mode)) == mode);
  CHECK(isolation_name(Isolation::degraded) == "degraded");
  CHECK_THAT(usage_error([] { parse_isolation("loose"); }),
             Catch::StartsWith("--isolation loose:"));
  CHECK_FALSE(usage_error([] { parse_isolation("Strict"); }).empty());
}

TEST_CASE("default hidden patterns cover the usual secrets", "[policy]") {
  auto& hidden = default_hidden_patterns();
  for (const char* must : {".env", ".ssh", ".aws", ".netrc", "*.pem", "id_rsa*"})
    CHECK(std::find(hidden.begin(), hidden.end(), must) != hidden.end());
}

TEST_CASE("policy summary never contains set-env values", "[policy]") {
  Policy policy;
  policy.set_env = {{"API_TOKEN", "s3cr3t-value"}};
  policy.allow_net = {parse_host_rule("--allow-net", "example.com"),
                      parse_host_rule("--allow-net", "[::1]:8080")};
  auto summary = policy.summary();
  CHECK(summary.dump().find("s3cr3t-value") == std::string::npos);
  CHECK(summary["set_env"] == nlohmann::json::array({"API_TOKEN"}));
  CHECK(summary["allow_net"] == nlohmann::json::array({"example.com", "[::1]:8080"}));
  CHECK(summary["isolation"] == "strict");
}

TEST_CASE("cpu limit defaults to the timeout", "[policy]") {
  Policy policy;
  policy.timeout_seconds = 12;
  CHECK(policy.cpu_limit() == Approx(12));
  policy.cpu_seconds = 3;
  CHECK(policy.cpu_limit() == Approx(3));
}

TEST_CASE("every policy flag has help text", "[policy]") {
  auto& help = policy_flag_help();
  for (const char* flag :
       {"--policy", "--workspace", "--ro", "--hide", "--allow-net", "--pass-env", "--set-env",
        "--timeout", "--cpu", "--memory", "--pids", "--file-size", "--tmp-size", "--output-limit",
        "--python", "--sandbox-user", "--audit-log", "--isolation"}) {
    bool found = false;
    for (auto& [usage, meaning] : help)
      found = found || usage.rfind(std::string(flag) + " ", 0) == 0;
    INFO(flag);
    CHECK(found);
  }
}

// Debian's ~/.profile puts ~/bin first on a login shell's PATH: a workspace that is the user's
// home protects its top-level bin, and no other workspace does.
TEST_CASE("a workspace that is the user's home protects its bin", "[policy]") {
  auto home =
      std::filesystem::temp_directory_path() / ("belljar-unit-home-" + std::to_string(::getpid()));
  std::filesystem::create_directories(home / "proj");
  const char* old = std::getenv("HOME");
  std::string saved = old ? old : "";
  ::setenv("HOME", home.c_str(), 1);
  Policy policy;
  policy.workspace = home;
  auto patterns = protected_patterns(policy);
  CHECK(std::count(patterns.begin(), patterns.end(), "/bin") == 1);
  policy.workspace = home / "proj";
  patterns = protected_patterns(policy);
  CHECK(std::count(patterns.begin(), patterns.end(), "/bin") == 0);
  policy.workspace = home;
  policy.writable = {"/bin"};
  patterns = protected_patterns(policy);
  CHECK(std::count(patterns.begin(), patterns.end(), "/bin") == 0);
  if (old)
    ::setenv("HOME", saved.c_str(), 1);
  else
    ::unsetenv("HOME");
  std::filesystem::remove_all(home);
}
