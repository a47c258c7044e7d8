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
