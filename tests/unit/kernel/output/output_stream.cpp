// Output: the per-cell budget and stream coalescing on UTF-8 boundaries.
#include "kernel/output/output_stream.hpp"

#include <catch2/catch.hpp>

using namespace belljar;

TEST_CASE("output budget grants up to the limit and counts the rest as dropped", "[output]") {
  OutputBudget budget;
  budget.reset(10);
  CHECK(budget.take(4) == 4);
  CHECK_FALSE(budget.exhausted());
  CHECK(budget.take(10) == 6);
  CHECK(budget.exhausted());
  CHECK(budget.used() == 10);
  CHECK(budget.dropped() == 4);
  CHECK(budget.take(5) == 0);
  CHECK(budget.dropped() == 9);
  CHECK(budget.limit() == 10);
}

TEST_CASE("output budget reset starts a new cell", "[output]") {
  OutputBudget budget;
  CHECK(budget.limit() == 10ull << 20);
  budget.reset(3);
  budget.take(7);
  budget.reset(5);
  CHECK(budget.used() == 0);
  CHECK(budget.dropped() == 0);
  CHECK(budget.take(5) == 5);
}

TEST_CASE("output budget of zero drops everything", "[output]") {
  OutputBudget budget;
  budget.reset(0);
  CHECK(budget.exhausted());
  CHECK(budget.take(100) == 0);
  CHECK(budget.dropped() == 100);
}

TEST_CASE("stream buffer coalesces writes into one chunk", "[output]") {
  OutputBudget budget;
  StreamBuffer stream;
  CHECK_FALSE(stream.pending());
  for (const char* piece : {"hello", ", ", "world", "\n"}) stream.append(piece, budget);
  CHECK(stream.pending());
  CHECK(stream.take(false) == "hello, world\n");
  CHECK_FALSE(stream.pending());
  CHECK(stream.take(false).empty());
  CHECK(stream.total_bytes() == 13);
  stream.reset_totals();
  CHECK(stream.total_bytes() == 0);
}

TEST_CASE("stream buffer keeps only what the budget grants", "[output]") {
  OutputBudget budget;
  budget.reset(8);
  StreamBuffer stream;
  stream.append("0123456789", budget);
  stream.append("more", budget);
  CHECK(stream.take(true) == "01234567");
  CHECK(stream.total_bytes() == 8);
  CHECK(budget.dropped() == 6);
}

TEST_CASE("stream buffer never splits a UTF-8 character", "[output]") {
  OutputBudget budget;
  StreamBuffer stream;
  SECTION("é fed one byte at a time") {
    stream.append("\xc3", budget);
    CHECK(stream.take(false).empty());
    CHECK(stream.pending());
    stream.append("\xa9", budget);
    CHECK(stream.take(false) == "é");
    CHECK_FALSE(stream.pending());
  }
  SECTION("text then a partial character") {
    stream.append("ab\xc3", budget);
    CHECK(stream.take(false) == "ab");
    stream.append("\xa9!", budget);
    CHECK(stream.take(false) == "é!");
  }
  SECTION("four-byte character fed one byte at a time") {
    const std::string smile = "\xf0\x9f\x99\x82";
    for (size_t i = 0; i + 1 < smile.size(); ++i) {
      stream.append(smile.substr(i, 1), budget);
      INFO("after byte " << i);
      CHECK(stream.take(false).empty());
    }
    stream.append(smile.substr(3), budget);
    CHECK(stream.take(false) == smile);
  }
  SECTION("the final take sends a partial tail too") {
    stream.append("x\xe2\x82", budget);
    CHECK(stream.take(false) == "x");
    CHECK(stream.take(true) == "\xe2\x82");
    CHECK_FALSE(stream.pending());
  }
}

TEST_CASE("output cut by the budget ends on a character boundary", "[output]") {
  OutputBudget budget;
  budget.reset(3);
  StreamBuffer stream;
  stream.append("ab\xc3\xa9", budget);
  std::string sent = stream.take(true);
  CHECK(sent == "ab");
  CHECK(utf8_complete_prefix(sent) == sent.size());
}

TEST_CASE("stream buffer is due when the size window fills", "[output]") {
  OutputBudget budget;
  StreamBuffer stream;
  auto now = StreamBuffer::Clock::now();
  CHECK_FALSE(stream.due(now + std::chrono::hours(1)));  // nothing pending
  stream.append(std::string(StreamBuffer::kFlushBytes - 1, 'x'), budget);
  CHECK_FALSE(stream.due(stream.deadline() - std::chrono::milliseconds(1)));
  stream.append("y", budget);
  CHECK(stream.due(stream.deadline() - std::chrono::milliseconds(1)));
}

TEST_CASE("stream buffer is due when the oldest byte has waited the flush delay", "[output]") {
  OutputBudget budget;
  StreamBuffer stream;
  auto before = StreamBuffer::Clock::now();
  stream.append("x", budget);
  CHECK(stream.deadline() >= before + StreamBuffer::kFlushDelay);
  CHECK_FALSE(stream.due(stream.deadline() - std::chrono::milliseconds(1)));
  CHECK(stream.due(stream.deadline()));
  // Later appends do not push the deadline back.
  auto deadline = stream.deadline();
  stream.append("y", budget);
  CHECK(stream.deadline() == deadline);
}

TEST_CASE("utf8_complete_prefix stops before an unfinished character", "[output]") {
  CHECK(utf8_complete_prefix("") == 0);
  CHECK(utf8_complete_prefix("abc") == 3);
  CHECK(utf8_complete_prefix("a\xc3") == 1);
  CHECK(utf8_complete_prefix("a\xc3\xa9") == 3);
  CHECK(utf8_complete_prefix("\xe2\x82") == 0);
  CHECK(utf8_complete_prefix("\xe2\x82\xac") == 3);
  CHECK(utf8_complete_prefix("\xf0\x9f\x99") == 0);
  CHECK(utf8_complete_prefix("\xf0\x9f\x99\x82") == 4);
  CHECK(utf8_complete_prefix("\xc3\xa9\xf0\x9f") == 2);
  CHECK(utf8_complete_prefix("x\xf0") == 1);
}

TEST_CASE("utf8_complete_prefix passes invalid bytes through rather than holding them",
          "[output]") {
  // Holding back bytes that can never complete would stall the stream until the cell ends.
  CHECK(utf8_complete_prefix("\x80") == 1);
  CHECK(utf8_complete_prefix("ab\xff") == 3);
  CHECK(utf8_complete_prefix("\x80\x80\x80\x80\x80") == 5);
}
