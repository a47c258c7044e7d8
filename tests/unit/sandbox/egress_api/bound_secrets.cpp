// Bound secrets as the supervisor loads them: values from its environment or a file, the
// refusals that keep a bad value from ever being used, and the placeholders the sandbox gets.
#include "sandbox/egress_api/bound_secrets.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

#include "usage_error.hpp"

using namespace belljar;
using belljar::testing::usage_error;
using Catch::Matchers::StartsWith;

namespace {
SecretBinding binding_of(const std::string& text, bool file = false) {
  return parse_secret_binding(file ? "--secret-file" : "--secret", text, file);
}
}  // namespace

TEST_CASE("values come from the kernel's environment, placeholders are per session") {
  const char* env[] = {"OTHER=x", "API_KEY=sk-0123456789abcdef", nullptr};
  auto first = BoundSecrets::load(
      {binding_of("API_KEY@api.example.com"), binding_of("API_KEY@*.example.org:8443")}, env);
  auto second = BoundSecrets::load({binding_of("API_KEY@api.example.com")}, env);
  REQUIRE(first->all().size() == 1);  // one name, two hosts
  const BoundSecret& secret = first->all().front();
  CHECK(secret.value == "sk-0123456789abcdef");
  CHECK(std::regex_match(secret.placeholder, std::regex("belljar-secret-API_KEY-[0-9a-f]{32}")));
  CHECK(secret.placeholder != second->all().front().placeholder);
  CHECK(secret.hosts.size() == 2);

  auto host = [](const char* name) { return *normalize_host(name); };
  CHECK(first->bound_to(host("api.example.com"), 443).size() == 1);
  CHECK(first->bound_to(host("api.example.com"), 80).empty());
  CHECK(first->bound_to(host("a.b.example.org"), 8443).size() == 1);
  CHECK(first->bound_to(host("example.org"), 8443).empty());
  CHECK(first->placeholders() ==
        std::vector<std::pair<std::string, std::string>>{{"API_KEY", secret.placeholder}});
}

TEST_CASE("a missing variable, an unreadable file or an unusable value refuses to start") {
  const char* env[] = {"SHORT=abc", "NEWLINE=0123456789\nX-Injected: 1", nullptr};
  CHECK_THAT(usage_error([&] { BoundSecrets::load({binding_of("MISSING@api.example.com")}, env); }),
             StartsWith("--secret MISSING@api.example.com:443: MISSING is not set in the kernel's "
                        "environment"));
  CHECK_THAT(usage_error([&] { BoundSecrets::load({binding_of("SHORT@api.example.com")}, env); }),
             StartsWith("--secret SHORT@api.example.com:443: the value is shorter than 8 bytes"));
  CHECK_THAT(
      usage_error([&] { BoundSecrets::load({binding_of("NEWLINE@api.example.com")}, env); }),
      StartsWith("--secret NEWLINE@api.example.com:443: the value holds a control character"));
  CHECK_THAT(usage_error([&] {
               BoundSecrets::load({binding_of("K=/nonexistent/key@api.example.com", true)}, env);
             }),
             StartsWith("--secret-file K=/nonexistent/key@api.example.com:443: cannot read "
                        "/nonexistent/key"));
}

TEST_CASE("a secret file's value loses one trailing newline") {
  auto path =
      std::filesystem::temp_directory_path() / ("belljar-secret-" + std::to_string(::getpid()));
  std::ofstream(path) << "sk-from-a-file-0123\n";
  const char* env[] = {nullptr};
  auto loaded =
      BoundSecrets::load({binding_of("K=" + path.string() + "@api.example.com", true)}, env);
  CHECK(loaded->all().front().value == "sk-from-a-file-0123");
  std::filesystem::remove(path);
}
