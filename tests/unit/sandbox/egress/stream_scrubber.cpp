// Values replaced in a stream that arrives in pieces: every split of every value is caught, and
// nothing but whole values is touched.
#include "sandbox/egress/stream_scrubber.hpp"

#include <catch2/catch.hpp>

using namespace belljar;

TEST_CASE("every split of a value across two pieces is caught") {
  const std::string value = "sk-live-ABCDEFGH", text = "<<" + value + ">>";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    StreamScrubber scrubber({{value, "P"}, {"another-secret", "Q"}});
    std::string out = scrubber.feed(text.substr(0, cut));
    out += scrubber.feed(text.substr(cut));
    out += scrubber.finish();
    INFO("cut " << cut);
    CHECK(out == "<<P>>");
  }
}

TEST_CASE("byte by byte, overlapping values and near misses") {
  StreamScrubber scrubber({{"abcdefgh", "[1]"}, {"abcdefghij", "[2]"}});
  std::string text = "abcdefg abcdefghij abcdefgh abcdefghi";
  std::string out;
  for (char c : text) out += scrubber.feed(std::string(1, c));
  out += scrubber.finish();
  CHECK(out == "abcdefg [2] [1] [1]i");
  CHECK(scrubber.scrub("xxabcdefghxx") == "xx[1]xx");
}

TEST_CASE("a line end releases what came before it: events stream, whatever the text") {
  StreamScrubber scrubber({{"sk-live-ABCDEFGH", "P"}, {"other-value", "Q"}});
  // Nothing after the newline is held back beyond the fixed amount; before it, nothing at all,
  // whether or not the text resembles the value.
  CHECK(scrubber.feed("data: {\"t\": \"sk-live\"}\n\n") == "data: {\"t\": \"sk-live\"}\n\n");
  CHECK(scrubber.feed("data: {\"t\": \"zz-zzzz\"}\n\n") == "data: {\"t\": \"zz-zzzz\"}\n\n");
  CHECK(scrubber.feed("data: sk-live-A") == "");
  CHECK(scrubber.feed("BCDEFGH\n") == "data: P\n");
  // A value with a control character turns the rule off: only the fixed hold applies.
  StreamScrubber odd({{"abc\ndefghij", "P"}, {"other-value", "Q"}});
  CHECK(odd.feed("xx abc\n") == "");
  std::string out = odd.feed("defghij yy");
  out += odd.finish();
  CHECK(out == "xx P yy");
}
