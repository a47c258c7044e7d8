// Worker frames: 4-byte big-endian length + JSON object, from an untrusted worker.
#include "kernel/session/worker_frames.hpp"

#include <catch2/catch.hpp>

#include "kernel/protocol/buffer_room.hpp"

using namespace belljar;
using nlohmann::json;

namespace {

std::string raw_frame(std::string_view body) {
  uint32_t n = static_cast<uint32_t>(body.size());
  std::string frame = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 8), static_cast<char>(n)};
  return frame + std::string(body);
}

std::string length_prefix(uint32_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
          static_cast<char>(n)};
}

}  // namespace

TEST_CASE("worker frame encodes as a big-endian length and the JSON", "[worker_frames]") {
  std::string frame = encode_worker_frame({{"type", "ping"}});
  const std::string body = R"({"type":"ping"})";
  REQUIRE(frame.size() == 4 + body.size());
  CHECK(frame.substr(0, 4) == std::string("\0\0\0\x0f", 4));
  CHECK(frame.substr(4) == body);
}

TEST_CASE("worker frame round-trips through the decoder", "[worker_frames]") {
  json message = {{"type", "stream"},
                  {"name", "stdout"},
                  {"text", "héllo \xf0\x9f\x99\x82"},
                  {"n", 42},
                  {"nested", {{"a", json::array({1, 2.5, nullptr, true})}}}};
  WorkerFrameDecoder decoder;
  decoder.feed(encode_worker_frame(message));
  auto out = decoder.next();
  REQUIRE(out);
  CHECK(*out == message);
  CHECK_FALSE(decoder.next());
  CHECK(decoder.fault().empty());
  CHECK(decoder.buffered() == 0);
}

TEST_CASE("worker frame split across feeds byte by byte is decoded once complete",
          "[worker_frames]") {
  std::string frame = encode_worker_frame({{"type", "result"}, {"value", "x"}});
  WorkerFrameDecoder decoder;
  for (size_t i = 0; i + 1 < frame.size(); ++i) {
    decoder.feed(frame.substr(i, 1));
    INFO("after byte " << i);
    REQUIRE_FALSE(decoder.next());
    REQUIRE(decoder.fault().empty());
  }
  decoder.feed(frame.substr(frame.size() - 1));
  auto out = decoder.next();
  REQUIRE(out);
  CHECK((*out)["value"] == "x");
}

TEST_CASE("several worker frames in one feed come out in order", "[worker_frames]") {
  std::string bytes;
  for (int i = 0; i < 5; ++i) bytes += encode_worker_frame({{"type", "n"}, {"i", i}});
  bytes += encode_worker_frame({{"type", "last"}}).substr(0, 6);  // a partial sixth
  WorkerFrameDecoder decoder;
  decoder.feed(bytes);
  for (int i = 0; i < 5; ++i) {
    auto out = decoder.next();
    REQUIRE(out);
    CHECK((*out)["i"] == i);
  }
  CHECK_FALSE(decoder.next());
  CHECK(decoder.fault().empty());
  CHECK(decoder.buffered() == 6);
}

TEST_CASE("worker frames keep decoding across buffer compaction", "[worker_frames]") {
  // Far more than the 64 KiB after which the consumed prefix is erased; fed in odd-sized pieces.
  std::string bytes;
  const int count = 3000;
  for (int i = 0; i < count; ++i)
    bytes += encode_worker_frame({{"type", "stream"}, {"i", i}, {"pad", std::string(i % 97, 'p')}});
  WorkerFrameDecoder decoder;
  int seen = 0;
  for (size_t at = 0; at < bytes.size(); at += 777) {
    decoder.feed(std::string_view(bytes).substr(at, 777));
    while (auto out = decoder.next()) {
      REQUIRE((*out)["i"] == seen);
      REQUIRE((*out)["pad"].get<std::string>().size() == static_cast<size_t>(seen % 97));
      ++seen;
    }
    REQUIRE(decoder.fault().empty());
  }
  CHECK(seen == count);
  CHECK(decoder.buffered() == 0);
}

TEST_CASE("the room a large worker frame needed is given back once it is read",
          "[worker_frames][bound]") {
  // One 8 MB display used to leave its room in the buffer for the rest of the session.
  std::string large =
      encode_worker_frame({{"type", "display"}, {"text", std::string(8 << 20, 'd')}});
  std::string small = encode_worker_frame({{"type", "done"}});
  WorkerFrameDecoder decoder;
  for (size_t at = 0; at < large.size(); at += 65536)  // as read_frames feeds it
    decoder.feed(std::string_view(large).substr(at, 65536));
  REQUIRE(decoder.room() >= large.size());
  auto out = decoder.next();
  REQUIRE(out);
  CHECK((*out)["text"].get<std::string>().size() == 8u << 20);
  CHECK(decoder.buffered() == 0);
  CHECK(decoder.room() <= kKeptRoom);
  // A frame split across reads keeps the room it is filling, and decodes whole.
  decoder.feed(small.substr(0, 3));
  decoder.feed(small.substr(3));
  auto next = decoder.next();
  REQUIRE(next);
  CHECK((*next)["type"] == "done");
}

TEST_CASE("worker frame longer than the cap is a fault", "[worker_frames]") {
  WorkerFrameDecoder decoder(1024);
  decoder.feed(length_prefix(1025));
  CHECK_FALSE(decoder.next());
  CHECK_THAT(decoder.fault(), Catch::Contains("1025"));

  SECTION("the default cap refuses a 4 GiB length without waiting for the body") {
    WorkerFrameDecoder big;
    big.feed("\xff\xff\xff\xff");
    CHECK_FALSE(big.next());
    CHECK_FALSE(big.fault().empty());
  }
  SECTION("a frame exactly at the cap is fine") {
    WorkerFrameDecoder exact(static_cast<uint32_t>(std::string(R"({"type":"t"})").size()));
    exact.feed(raw_frame(R"({"type":"t"})"));
    CHECK(exact.next());
    CHECK(exact.fault().empty());
  }
}

TEST_CASE("worker frame that is not an object with a string type is a fault", "[worker_frames]") {
  const char* bodies[] = {"[1,2,3]",
                          "\"type\"",
                          "42",
                          "null",
                          "{}",
                          R"({"kind":"stream"})",
                          R"({"type":7})",
                          R"({"type":null})",
                          R"({"type":["stream"]})"};
  for (const char* body : bodies) {
    WorkerFrameDecoder decoder;
    decoder.feed(raw_frame(body));
    INFO(body);
    CHECK_FALSE(decoder.next());
    CHECK_THAT(decoder.fault(), Catch::Contains("type"));
  }
}

TEST_CASE("worker frame with invalid JSON is a fault", "[worker_frames]") {
  const char* bodies[] = {"", "{", "{\"type\":\"a\"", "not json", "{\"type\":\"a\"}x"};
  for (const char* body : bodies) {
    WorkerFrameDecoder decoder;
    decoder.feed(raw_frame(body));
    INFO("body: " << body);
    CHECK_FALSE(decoder.next());
    CHECK_THAT(decoder.fault(), Catch::Contains("unparsable"));
  }
}

TEST_CASE("worker frame nested deeper than the JSON limit is a fault", "[worker_frames]") {
  WorkerFrameDecoder decoder;
  decoder.feed(raw_frame("{\"type\":\"x\",\"v\":" + std::string(200000, '[') +
                         std::string(200000, ']') + "}"));
  CHECK_FALSE(decoder.next());
  CHECK_THAT(decoder.fault(), Catch::Contains("nested"));
}

TEST_CASE("worker frame fault is sticky", "[worker_frames]") {
  WorkerFrameDecoder decoder;
  decoder.feed(raw_frame("garbage"));
  decoder.feed(encode_worker_frame({{"type", "ok"}}));
  REQUIRE_FALSE(decoder.next());
  std::string fault = decoder.fault();
  REQUIRE_FALSE(fault.empty());
  // A good frame already buffered, and one fed later, are both refused: the worker is restarted.
  CHECK_FALSE(decoder.next());
  decoder.feed(encode_worker_frame({{"type", "ok"}}));
  CHECK_FALSE(decoder.next());
  CHECK(decoder.fault() == fault);
}

TEST_CASE("worker frame with invalid UTF-8 in a string still decodes and dumps",
          "[worker_frames]") {
  // nlohmann rejects invalid UTF-8 while parsing; either way the decoder must not throw.
  WorkerFrameDecoder decoder;
  decoder.feed(raw_frame("{\"type\":\"stream\",\"text\":\"\xff\xfe\"}"));
  std::optional<json> out;
  REQUIRE_NOTHROW(out = decoder.next());
  if (!out) CHECK_FALSE(decoder.fault().empty());
}

TEST_CASE("encode_worker_frame does not throw on invalid UTF-8", "[worker_frames]") {
  std::string frame;
  REQUIRE_NOTHROW(frame =
                      encode_worker_frame({{"type", "stream"}, {"text", std::string("\xc3", 1)}}));
  WorkerFrameDecoder decoder;
  decoder.feed(frame);
  auto out = decoder.next();
  REQUIRE(out);
  CHECK((*out)["text"] == "\xef\xbf\xbd");
}
