// Base64 for comm buffers: round trips every length, refuses what is not canonical.
#include "kernel/protocol/base64.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace belljar;

TEST_CASE("base64 round-trips bytes of every length and value", "[base64]") {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    auto text = base64_encode(bytes);
    CHECK(text.size() == 4 * ((bytes.size() + 2) / 3));
    auto back = base64_decode(text);
    REQUIRE(back);
    CHECK(*back == bytes);
    bytes.push_back(static_cast<char>(i * 37 + 11));
  }
  CHECK(base64_encode("hi\xff") == "aGn/");
  CHECK(base64_decode("aGk=") == std::optional<std::string>("hi"));
}

TEST_CASE("base64 refuses text that is not base64", "[base64]") {
  for (const char* bad : {"a", "aGk", "aG k", "aGk=\n", "a=Gk", "aGk*", "=aGk", "aG==aGk="})
    CHECK_FALSE(base64_decode(bad));
  CHECK(base64_decode("") == std::optional<std::string>(""));
}
