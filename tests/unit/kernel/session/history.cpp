// History: answers to history_request (tail, range, search) over the cells run so far.
#include "kernel/session/history.hpp"

#include <catch2/catch.hpp>

using namespace belljar;
using nlohmann::json;

namespace {

// Cell n holds "x = n" for n = 1..count.
History numbered(int count) {
  History history;
  for (int n = 1; n <= count; ++n) history.add(n, "x = " + std::to_string(n));
  return history;
}

// The line numbers of a reply's rows.
std::vector<int> lines(const json& rows) {
  std::vector<int> out;
  for (auto& row : rows) out.push_back(row.at(1).get<int>());
  return out;
}

}  // namespace

TEST_CASE("history rows are [session, line, source]", "[history]") {
  History history;
  history.add(1, "import os");
  auto rows = history.query({{"hist_access_type", "tail"}, {"n", 1}});
  REQUIRE(rows.size() == 1);
  CHECK(rows[0] == json::array({1, 1, "import os"}));
}

TEST_CASE("history tail returns the last n cells, oldest first", "[history]") {
  History history = numbered(15);
  CHECK(lines(history.query({{"hist_access_type", "tail"}, {"n", 3}})) ==
        std::vector<int>{13, 14, 15});
  CHECK(lines(history.query({{"hist_access_type", "tail"}})).size() == 10);  // default n
  CHECK(lines(history.query({{"hist_access_type", "tail"}, {"n", 100}})).size() == 15);
  CHECK(history.query({{"hist_access_type", "tail"}, {"n", 0}}).empty());
  CHECK(history.query({{"hist_access_type", "tail"}, {"n", -5}}).empty());
  CHECK(lines(history.query(json::object())) ==
        lines(history.query({{"hist_access_type", "tail"}})));
}

TEST_CASE("history range returns start up to but not including stop", "[history]") {
  History history = numbered(10);
  auto range = [&](json extra) {
    json request = {{"hist_access_type", "range"}};
    request.update(extra);
    return lines(history.query(request));
  };
  CHECK(range({{"session", 0}, {"start", 3}, {"stop", 6}}) == std::vector<int>{3, 4, 5});
  CHECK(range({{"start", 8}}) == std::vector<int>{8, 9, 10});
  CHECK(range({{"start", 8}, {"stop", nullptr}}) == std::vector<int>{8, 9, 10});
  CHECK(range({{"start", 5}, {"stop", 5}}).empty());
  CHECK(range(json::object()).size() == 10);
  CHECK(range({{"session", 1}, {"start", 9}}) == std::vector<int>{9, 10});
  CHECK(range({{"session", -1}, {"start", 9}}) == std::vector<int>{9, 10});
  // Earlier sessions are not kept by this kernel.
  CHECK(range({{"session", 2}, {"start", 1}}).empty());
}

TEST_CASE("history search matches a glob, newest n, optionally unique", "[history]") {
  History history;
  history.add(1, "print(1)");
  history.add(2, "x = 2");
  history.add(3, "print(2)");
  history.add(4, "print(1)");
  history.add(5, "y = print");
  auto search = [&](json extra) {
    json request = {{"hist_access_type", "search"}};
    request.update(extra);
    return history.query(request);
  };
  CHECK(lines(search({{"pattern", "print*"}})) == std::vector<int>{1, 3, 4});
  CHECK(lines(search({{"pattern", "print*"}, {"n", 2}})) == std::vector<int>{3, 4});
  CHECK(lines(search({{"pattern", "print*"}, {"unique", true}})) == std::vector<int>{3, 4});
  CHECK(lines(search({{"pattern", "print*"}, {"unique", true}, {"n", 1}})) == std::vector<int>{4});
  CHECK(lines(search({{"pattern", "?=*"}})).empty());
  CHECK(lines(search({{"pattern", "? = *"}})) == std::vector<int>{2, 5});
  CHECK(lines(search({{"pattern", "*print"}})) == std::vector<int>{5});
  CHECK(lines(search(json::object())).size() == 5);  // default pattern "*"
  CHECK(search({{"pattern", "nothing*"}}).empty());
}

TEST_CASE("history search glob spans lines of a multi-line cell", "[history]") {
  History history;
  history.add(1, "def f():\n    return 1");
  CHECK(history.query({{"hist_access_type", "search"}, {"pattern", "def*return*"}}).size() == 1);
}

TEST_CASE("history keeps only the newest cells past capacity", "[history]") {
  History history(3);
  for (int n = 1; n <= 5; ++n) history.add(n, "cell");
  CHECK(lines(history.query({{"hist_access_type", "tail"}, {"n", 10}})) ==
        std::vector<int>{3, 4, 5});
}

TEST_CASE("history with an unknown access type answers an empty list", "[history]") {
  History history = numbered(3);
  auto rows = history.query({{"hist_access_type", "everything"}});
  CHECK(rows.is_array());
  CHECK(rows.empty());
}

TEST_CASE("history ignores request numbers of the wrong type", "[history]") {
  History history = numbered(12);
  CHECK(lines(history.query({{"hist_access_type", "tail"}, {"n", "3"}})).size() == 10);
}

TEST_CASE("glob_match supports * and ?", "[history]") {
  CHECK(glob_match("*", ""));
  CHECK(glob_match("a*c", "abbbc"));
  CHECK(glob_match("a?c", "abc"));
  CHECK_FALSE(glob_match("a?c", "ac"));
  CHECK_FALSE(glob_match("abc", "ABC"));
  CHECK(glob_match("*/*", "a/b"));
  CHECK(glob_match("*", ".hidden"));
}
