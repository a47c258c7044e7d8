// ZmtpMeter: what a peer may send a Jupyter channel before it is authenticated, read from the
// ZMTP frame headers before libzmq sees them.
#include "kernel/protocol/zmtp_meter.hpp"

#include <catch2/catch.hpp>
#include <string>

using belljar::ZmtpLimits;
using belljar::ZmtpMeter;
using belljar::ZmtpProperties;

namespace {
constexpr uint64_t kMiB = 1 << 20;

std::string greeting(char major = 3, const std::string& mechanism = "NULL") {
  std::string g(64, '\0');
  g[0] = '\xff';
  g[9] = '\x7f';
  g[10] = major;
  g[11] = 1;
  g.replace(12, mechanism.size(), mechanism);
  return g;
}

std::string frame(uint8_t flags, uint64_t size, bool with_body = true) {
  std::string f(1, static_cast<char>(flags));
  if (size > 255) {
    f[0] = static_cast<char>(flags | 2);
    for (int shift = 56; shift >= 0; shift -= 8) f += static_cast<char>((size >> shift) & 0xff);
  } else {
    f += static_cast<char>(size);
  }
  if (with_body) f += std::string(size, 'x');
  return f;
}

std::string ready() {
  std::string body = "\x05READY\x0bSocket-Type" + std::string("\0\0\0\x06", 4) + "DEALER";
  return frame(4, body.size(), false) + body;
}

ZmtpMeter meter(uint64_t max_message = 64 * kMiB) {
  return ZmtpMeter(ZmtpLimits{max_message});
}
}  // namespace

TEST_CASE("a peer's messages within the limit pass, in any slicing", "[zmtp]") {
  std::string stream = greeting() + ready() + frame(1, 0) + frame(1, 3) + frame(0, 300);
  stream += frame(0, 5);  // a second message
  ZmtpMeter whole = meter(1000);
  CHECK(whole.feed(stream));
  CHECK(whole.unfinished_bytes() == 0);
  ZmtpMeter bytewise = meter(1000);
  for (char c : stream) REQUIRE(bytewise.feed(std::string_view(&c, 1)));
  CHECK(bytewise.why().empty());
}

TEST_CASE("a message's parts count together, declared sizes as their headers come", "[zmtp]") {
  ZmtpMeter m = meter(64 * kMiB);
  REQUIRE(m.feed(greeting() + ready()));
  // Sixteen parts of 4 MiB declared: at the limit, not past it.
  for (int i = 0; i < 15; ++i) REQUIRE(m.feed(frame(1, 4 * kMiB)));
  CHECK(m.unfinished_bytes() == 60 * kMiB);
  // A header in pieces is judged when it is whole.
  REQUIRE(m.feed(frame(1, 4 * kMiB, false).substr(0, 5)));
  CHECK(m.unfinished_bytes() == 60 * kMiB);
  REQUIRE(m.feed(frame(1, 4 * kMiB).substr(5)));  // 64 MiB exactly
  CHECK(m.unfinished_bytes() == 64 * kMiB);
  // The next header is refused before its body: libzmq would allocate it on reading it.
  CHECK_FALSE(m.feed(frame(0, 1, false)));
  CHECK_THAT(m.why(), Catch::Contains("a message over 64 MiB"));
  CHECK_FALSE(m.feed("x"));  // finished
}

TEST_CASE("one part over the limit is refused at its header", "[zmtp]") {
  ZmtpMeter m = meter(64 * kMiB);
  REQUIRE(m.feed(greeting() + ready()));
  CHECK_FALSE(m.feed(frame(0, uint64_t{1} << 30, false)));
  CHECK_THAT(m.why(), Catch::Contains("1024 MiB"));
  ZmtpMeter absurd = meter(64 * kMiB);
  REQUIRE(absurd.feed(greeting() + ready()));
  CHECK_FALSE(absurd.feed(frame(0, ~uint64_t{0}, false)));  // no overflow in the sum
}

TEST_CASE("parts beyond the count are refused, and a finished message frees its bytes", "[zmtp]") {
  ZmtpMeter m(ZmtpLimits{kMiB, 3});
  REQUIRE(m.feed(greeting() + ready()));
  REQUIRE(m.feed(frame(1, 1) + frame(1, 1) + frame(0, 1)));
  CHECK(m.unfinished_bytes() == 0);
  REQUIRE(m.feed(frame(1, 0) + frame(1, 0) + frame(1, 0)));
  CHECK_FALSE(m.feed(frame(0, 0)));
  CHECK_THAT(m.why(), Catch::Contains("more than 3 parts"));
}

TEST_CASE("commands are bounded and never continued", "[zmtp]") {
  ZmtpMeter big = meter();
  REQUIRE(big.feed(greeting()));
  CHECK_FALSE(big.feed(frame(4, 65 * 1024, false)));
  ZmtpMeter continued = meter();
  REQUIRE(continued.feed(greeting()));
  CHECK_FALSE(continued.feed(frame(5, 1)));
  CHECK_THAT(continued.why(), Catch::Contains("MORE"));
  ZmtpMeter reserved = meter();
  REQUIRE(reserved.feed(greeting()));
  CHECK_FALSE(reserved.feed(frame(8, 1)));
}

TEST_CASE("only a ZMTP 3 greeting with the NULL mechanism is served", "[zmtp]") {
  CHECK_FALSE(meter().feed("GET / HTTP/1.1\r\n"));  // refused at the signature, not at 64
  CHECK_FALSE(meter().feed(std::string("\x01\x00", 2) + "identity"));  // ZMTP 1.0
  ZmtpMeter two = meter();
  CHECK_FALSE(two.feed(greeting(2)));
  CHECK_THAT(two.why(), Catch::Contains("2.x"));
  ZmtpMeter curve = meter();
  CHECK_FALSE(curve.feed(greeting(3, "CURVE")));
  CHECK_THAT(curve.why(), Catch::Contains("NULL"));
  ZmtpMeter partial = meter();
  CHECK(partial.feed(greeting().substr(0, 40)));  // a greeting in pieces waits for the rest
  CHECK(partial.feed(greeting().substr(40)));
}

TEST_CASE("the handshake is the greeting and then READY, kept whole for the gate", "[zmtp]") {
  ZmtpMeter m = meter();
  std::string stream = greeting() + ready();
  REQUIRE(m.feed(stream.substr(0, 70)));
  CHECK_FALSE(m.handshake_done());
  REQUIRE(m.feed(stream.substr(70) + frame(0, 3)));
  CHECK(m.handshake_done());
  CHECK(m.handshake_end() == stream.size());
  auto properties = belljar::read_ready(m.ready_body());
  REQUIRE(properties);
  CHECK(*properties == ZmtpProperties{{"Socket-Type", "DEALER"}});
  ZmtpMeter early = meter();
  CHECK_FALSE(early.feed(greeting() + frame(0, 3)));  // a message before READY
  CHECK_THAT(early.why(), Catch::Contains("before the READY"));
  ZmtpMeter other = meter();
  CHECK_FALSE(other.feed(greeting() + frame(4, 5)));  // a command, but not READY
  CHECK_THAT(other.why(), Catch::Contains("not a READY"));
}

TEST_CASE("a READY frame rebuilt reads back as its properties, short or long", "[zmtp]") {
  ZmtpProperties small{{"Socket-Type", "ROUTER"}, {"Identity", std::string("\0id", 3)}};
  ZmtpProperties large{{"Socket-Type", "DEALER"}, {"X-Pad", std::string(300, 'p')}};
  for (const auto& properties : {small, large}) {
    ZmtpMeter m = meter();
    REQUIRE(m.feed(greeting() + belljar::ready_frame(properties)));
    REQUIRE(m.handshake_done());
    CHECK(belljar::read_ready(m.ready_body()) == properties);
  }
  CHECK_FALSE(
      belljar::read_ready(std::string("\x05READY\x08Identity\0\0\0\x09"
                                      "ab",
                                      21)));
}
