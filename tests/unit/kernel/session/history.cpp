// History: answers to history_request (tail, range, search) over the cells run so far.
#include "kernel/session/history.hpp"

#include <catch2/catch.hpp>

#include "sandbox/policy/policy_flags.hpp"

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

TEST_CASE("history over its size answers tail, range and search from the cells kept",
          "[history][bound]") {
  History history(100);
  for (int n = 1; n <= 250; ++n) history.add(n, "x = " + std::to_string(n));
  auto ask = [&](json request) { return lines(history.query(request)); };
  auto from_to = [](int first, int last) {
    std::vector<int> out;
    for (int n = first; n <= last; ++n) out.push_back(n);
    return out;
  };
  // tail: the newest n, and no more than are kept.
  CHECK(ask({{"hist_access_type", "tail"}, {"n", 3}}) == from_to(248, 250));
  CHECK(ask({{"hist_access_type", "tail"}, {"n", 1000}}) == from_to(151, 250));
  // range: line numbers stay the execution counts; the dropped lines are simply absent.
  CHECK(ask({{"hist_access_type", "range"}, {"start", 1}}) == from_to(151, 250));
  CHECK(ask({{"hist_access_type", "range"}, {"start", 140}, {"stop", 156}}) == from_to(151, 155));
  CHECK(ask({{"hist_access_type", "range"}, {"start", 1}, {"stop", 151}}).empty());
  // search: the newest matches among the kept cells.
  CHECK(ask({{"hist_access_type", "search"}, {"pattern", "x = 1??"}}) == from_to(151, 199));
  CHECK(ask({{"hist_access_type", "search"}, {"pattern", "x = 1??"}, {"n", 2}}) ==
        from_to(198, 199));
  CHECK(ask({{"hist_access_type", "search"}, {"pattern", "x = 15"}}).empty());  // dropped
}

TEST_CASE("history search with unique keeps the newest of each source, within the bound",
          "[history][bound]") {
  History history(4);
  for (int n = 1; n <= 6; ++n) history.add(n, n % 2 ? "odd" : "even");
  auto rows = history.query({{"hist_access_type", "search"}, {"unique", true}});
  CHECK(lines(rows) == std::vector<int>{5, 6});
}

TEST_CASE("history keeps fewer cells once their code passes its byte bound", "[history][bound]") {
  History history(1000);
  std::string big(100 << 10, 'x');  // 100 KiB of code per cell
  for (int n = 1; n <= 100; ++n) history.add(n, big);
  auto kept = lines(history.query({{"hist_access_type", "tail"}, {"n", 1000}}));
  size_t fit = History::kBytes / big.size();
  REQUIRE(kept.size() == fit);
  CHECK(kept.back() == 100);
  CHECK(kept.front() == 100 - static_cast<int>(fit) + 1);
}

TEST_CASE("history keeps the newest cell even when it alone passes the byte bound",
          "[history][bound]") {
  History history;
  history.add(1, "small");
  history.add(2, std::string(History::kBytes + 1, 'x'));
  auto rows = history.query({{"hist_access_type", "tail"}, {"n", 10}});
  REQUIRE(lines(rows) == std::vector<int>{2});
  CHECK(rows[0][2].get<std::string>().size() == History::kBytes + 1);  // whole, never cut
  history.add(3, "after");
  CHECK(lines(history.query({{"hist_access_type", "tail"}, {"n", 10}})) == std::vector<int>{3});
}

TEST_CASE("history keeps a long result cut, on a character boundary", "[history][bound]") {
  History history;
  std::string accented;
  while (accented.size() < 3 * History::kOutputBytes) accented += "\xc3\xa9";  // é
  history.add(1, "s", accented);
  history.add(2, "t", "short");
  auto rows = history.query({{"hist_access_type", "tail"}, {"n", 2}, {"output", true}});
  std::string kept = rows[0][2][1];
  const std::string ellipsis = "\xe2\x80\xa6";
  CHECK(kept.size() <= History::kOutputBytes);
  REQUIRE(kept.size() > ellipsis.size());
  CHECK(kept.substr(kept.size() - ellipsis.size()) == ellipsis);
  std::string text = kept.substr(0, kept.size() - ellipsis.size());
  CHECK(text.size() % 2 == 0);  // whole two-byte characters only
  CHECK(accented.rfind(text, 0) == 0);
  CHECK(rows[1][2] == json::array({"t", "short"}));
}

TEST_CASE("history size 0 keeps nothing", "[history][bound]") {
  History history(0);
  history.add(1, "x = 1");
  CHECK(history.query({{"hist_access_type", "tail"}, {"n", 10}}).empty());
  CHECK(history.query({{"hist_access_type", "search"}}).empty());
}

TEST_CASE("history's default and byte bound are what --history-size says", "[history][flags]") {
  CHECK(History::kDefaultEntries == Policy{}.history_size);
  const PolicyFlag* flag = find_policy_flag("--history-size");
  REQUIRE(flag);
  CHECK(flag->fallback == std::to_string(History::kDefaultEntries));
  CHECK(History::kBytes == 4u << 20);
  CHECK_THAT(std::string(flag->meaning), Catch::Contains("pass 4M"));
}
