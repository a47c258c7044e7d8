// NewestEntries: the newest of what a session keeps adding, within a count and a byte bound.
#include "kernel/session/newest_entries.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using belljar::NewestEntries;

namespace {
std::vector<int> kept(const NewestEntries<int>& entries) {
  std::vector<int> out;
  for (size_t i = 0; i < entries.size(); ++i) out.push_back(entries[i]);
  return out;
}
}  // namespace

TEST_CASE("newest entries drop the oldest past the count", "[newest]") {
  NewestEntries<int> entries(3, 1000);
  for (int n = 1; n <= 5; ++n) entries.push(n, 1);
  CHECK(kept(entries) == std::vector<int>{3, 4, 5});
  CHECK(entries.bytes() == 3);
}

TEST_CASE("newest entries drop the oldest past the bytes", "[newest]") {
  NewestEntries<int> entries(100, 10);
  entries.push(1, 4);
  entries.push(2, 4);
  CHECK(kept(entries) == std::vector<int>{1, 2});
  entries.push(3, 4);  // 12 bytes: the first goes
  CHECK(kept(entries) == std::vector<int>{2, 3});
  CHECK(entries.bytes() == 8);
  entries.push(4, 9);  // only the newest fits
  CHECK(kept(entries) == std::vector<int>{4});
  CHECK(entries.bytes() == 9);
}

TEST_CASE("newest entries keep the newest alone over the bytes, and nothing at count 0",
          "[newest]") {
  NewestEntries<int> entries(100, 10);
  entries.push(1, 1);
  entries.push(2, 50);
  CHECK(kept(entries) == std::vector<int>{2});
  entries.push(3, 1);
  CHECK(kept(entries) == std::vector<int>{3});
  CHECK(entries.bytes() == 1);

  NewestEntries<int> none(0, 10);
  none.push(1, 1);
  CHECK(none.size() == 0);
  CHECK(none.bytes() == 0);
}

TEST_CASE("newest entries stay within both bounds over many pushes", "[newest]") {
  NewestEntries<std::string> entries(50, 1000);
  for (int n = 0; n < 10000; ++n) {
    std::string text(static_cast<size_t>(n % 97), 'x');
    size_t bytes = text.size();
    entries.push(std::move(text), bytes);
    REQUIRE(entries.size() <= 50);
    REQUIRE((entries.bytes() <= 1000 || entries.size() == 1));
  }
  CHECK(entries[entries.size() - 1].size() == 9999 % 97);
}
