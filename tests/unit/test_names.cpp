// Every unit test is registered with ctest by its name (catch_discover_tests): a `;` splits the
// name into two tests that each match nothing and pass, running nothing (25 tests ran in no CI
// run so), and a leading `-` is read as an option. No name may hold either.
#include <catch2/catch.hpp>
#include <string>

TEST_CASE("every unit test's name reaches ctest whole", "[test-names]") {
  const auto& tests = Catch::getRegistryHub().getTestCaseRegistry().getAllTests();
  REQUIRE(tests.size() > 600);
  for (const auto& test : tests) {
    const std::string& name = test.getTestCaseInfo().name;
    INFO(name);
    CHECK(name.find(';') == std::string::npos);
    CHECK(name.rfind('-', 0) != 0);
  }
}
