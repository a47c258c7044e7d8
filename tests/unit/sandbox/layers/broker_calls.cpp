// The broker's written table (docs/security.md, "What the broker admits, call by call") names
// every call the seccomp filter hands the broker, and the hard links the filter refuses beside
// them, and no other call: one added to the filter's list without a row saying what passes and
// why fails here the day it is added. The broker's dispatch table (broker_handlers.hpp) holds
// one handler for each of the same calls: a call handed over without one would be refused
// (ENOSYS), a handler for a call never handed over is dead code.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "sandbox/jail/broker_handlers.hpp"
#include "sandbox/layers/seccomp_filter.hpp"
#include "sandbox/layers/syscall_table.hpp"

using namespace belljar;

namespace {

// The call names in the first column of the table after `heading`, up to the next blank line
// that follows it: lower-case words in backticks (flags such as `O_CREAT` are upper-case).
std::set<std::string> calls_in_table(const std::string& text, const std::string& heading) {
  std::set<std::string> calls;
  auto at = text.find(heading);
  if (at == std::string::npos) return calls;
  std::istringstream lines(text.substr(at));
  std::string line;
  bool in_table = false;
  static const std::regex call("`([a-z0-9_]+)`");
  while (std::getline(lines, line)) {
    if (line.rfind("| ", 0) != 0) {
      if (in_table) break;
      continue;
    }
    in_table = true;
    std::string first = line.substr(2, line.find(" |", 2) - 2);
    for (std::sregex_iterator it(first.begin(), first.end(), call), end; it != end; ++it)
      calls.insert((*it)[1]);
  }
  return calls;
}

}  // namespace

TEST_CASE("every call the filter hands the broker has a row in its written table, and no other") {
  auto security = std::filesystem::path(BELLJAR_README).parent_path() / "docs" / "security.md";
  std::ifstream in(security);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto written = calls_in_table(text.str(), "**What the broker admits, call by call.**");
  std::set<std::string> handed(brokered_syscalls().begin(), brokered_syscalls().end());
  handed.insert({"link", "linkat"});  // refused by the filter itself, a row of their own
  CHECK(written == handed);
}

TEST_CASE("the broker's dispatch table has one handler for each call the filter hands it") {
  std::set<std::string> handed(brokered_syscalls().begin(), brokered_syscalls().end());
  std::set<std::string> dispatched;
  for (const auto& call : brokered_calls()) {
    INFO(call.name);
    CHECK(dispatched.insert(call.name).second);  // once
    CHECK(call.handle != nullptr);
    CHECK(std::string(call.why).size() > 0);
    CHECK(native_syscall_number(call.name) >= 0);
  }
  CHECK(dispatched == handed);
}
