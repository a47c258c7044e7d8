// Wire messages: what parse_wire_message accepts and why it refuses the rest.
#include "kernel/protocol/wire_message.hpp"

#include <catch2/catch.hpp>

#include "kernel/protocol/bounded_json.hpp"

using namespace belljar;

namespace {

// Frames written by jupyter_client 7.4.9 (/usr/bin/python3):
//   s = Session(key=b"belljar-jupyter-client-key", username="tester", session="2c1b7d0e-session")
//   s.serialize(s.msg("execute_request", {"code": "1+1", "silent": False}),
//               ident=[b"client-routing-id"])
const char* kClientKey = "belljar-jupyter-client-key";
const std::vector<std::string> kClientFrames = {
    "client-routing-id",
    "<IDS|MSG>",
    "eff5cf85b730462e6beff811b0cee8bbd02dc595fade557a45425dc2275d59a5",
    "{\"msg_id\": \"2c1b7d0e-session_8424_0\", \"msg_type\": \"execute_request\", \"username\": "
    "\"tester\", \"session\": \"2c1b7d0e-session\", \"date\": \"2026-11-29T23:04:10.044129Z\", "
    "\"version\": \"5.3\"}",
    "{}",
    "{}",
    "{\"code\": \"1+1\", \"silent\": false}",
};

const char* kHeader =
    R"({"msg_id":"m-1","msg_type":"kernel_info_request","session":"s-1","username":"u","version":"5.3"})";

// Frames for the given JSON parts, correctly signed, so parsing gets past the signature.
std::vector<std::string> signed_frames(const Signer& signer, std::vector<std::string> parts,
                                       std::vector<std::string> identities = {},
                                       std::vector<std::string> buffers = {}) {
  std::vector<std::string> frames = std::move(identities);
  frames.emplace_back(kDelimiter);
  frames.push_back(signer.sign({parts[0], parts[1], parts[2], parts[3]}));
  for (auto& p : parts) frames.push_back(p);
  for (auto& b : buffers) frames.push_back(b);
  return frames;
}

WireFault parse(const std::vector<std::string>& frames, const Signer& signer,
                WireMessage* out = nullptr) {
  ReplayGuard replay;
  WireMessage scratch;
  return parse_wire_message(frames, signer, replay, out ? *out : scratch);
}

std::string nested(int depth) {
  return "{\"x\":" + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
}

}  // namespace

TEST_CASE("message signed by jupyter_client is accepted", "[wire]") {
  Signer signer(kClientKey);
  WireMessage msg;
  REQUIRE(parse(kClientFrames, signer, &msg) == WireFault::none);
  CHECK(msg.type() == "execute_request");
  CHECK(msg.id() == "2c1b7d0e-session_8424_0");
  CHECK(msg.header["session"] == "2c1b7d0e-session");
  CHECK(msg.content["code"] == "1+1");
  CHECK(msg.content["silent"] == false);
  CHECK(msg.parent_header.empty());
  CHECK(msg.metadata.empty());
  CHECK(msg.identities == std::vector<std::string>{"client-routing-id"});
  CHECK(msg.buffers.empty());
}

TEST_CASE("message from jupyter_client with any signed byte changed is refused", "[wire]") {
  Signer signer(kClientKey);
  // Frames 2..6 are the signature and the four signed parts.
  for (size_t frame = 2; frame < kClientFrames.size(); ++frame) {
    for (size_t at :
         {size_t{0}, kClientFrames[frame].size() / 2, kClientFrames[frame].size() - 1}) {
      auto frames = kClientFrames;
      frames[frame][at] = static_cast<char>(frames[frame][at] ^ 0x01);
      INFO("frame " << frame << " byte " << at);
      CHECK(parse(frames, signer) == WireFault::bad_signature);
    }
  }
}

TEST_CASE("message from jupyter_client under another key is refused", "[wire]") {
  Signer signer("not-the-key");
  CHECK(parse(kClientFrames, signer) == WireFault::bad_signature);
}

TEST_CASE("routing identities are not signed and may change", "[wire]") {
  Signer signer(kClientKey);
  auto frames = kClientFrames;
  frames[0] = "another-router";
  WireMessage msg;
  REQUIRE(parse(frames, signer, &msg) == WireFault::none);
  CHECK(msg.identities == std::vector<std::string>{"another-router"});
}

TEST_CASE("message without the delimiter is refused", "[wire]") {
  Signer signer("k");
  auto frames = signed_frames(signer, {kHeader, "{}", "{}", "{}"});
  frames.erase(frames.begin());  // the delimiter
  CHECK(parse(frames, signer) == WireFault::no_delimiter);
  CHECK(parse({}, signer) == WireFault::no_delimiter);
  CHECK(parse({"<IDS|MSG", "sig", "{}", "{}", "{}", "{}"}, signer) == WireFault::no_delimiter);
}

TEST_CASE("message with too few frames after the delimiter is refused", "[wire]") {
  Signer signer("k");
  auto frames = signed_frames(signer, {kHeader, "{}", "{}", "{}"});
  for (size_t keep = 1; keep < frames.size(); ++keep) {
    std::vector<std::string> cut(frames.begin(), frames.begin() + static_cast<long>(keep));
    INFO("frames kept: " << keep);
    CHECK(parse(cut, signer) == WireFault::too_few_frames);
  }
}

TEST_CASE("message with a wrong or missing signature is refused", "[wire]") {
  Signer signer("k");
  auto frames = signed_frames(signer, {kHeader, "{}", "{}", "{}"});
  REQUIRE(parse(frames, signer) == WireFault::none);
  SECTION("empty signature") {
    frames[1] = "";
    CHECK(parse(frames, signer) == WireFault::bad_signature);
  }
  SECTION("signature of other parts") {
    frames[1] = signer.sign({"{}", "{}", "{}", "{}"});
    CHECK(parse(frames, signer) == WireFault::bad_signature);
  }
  SECTION("signed by another key") {
    Signer other("other");
    frames[1] = other.sign({frames[2], frames[3], frames[4], frames[5]});
    CHECK(parse(frames, signer) == WireFault::bad_signature);
  }
}

TEST_CASE("replayed message is dropped", "[wire]") {
  Signer signer("k");
  ReplayGuard replay;
  auto frames = signed_frames(signer, {kHeader, "{}", "{}", "{}"});
  WireMessage first, second;
  CHECK(parse_wire_message(frames, signer, replay, first) == WireFault::none);
  CHECK(parse_wire_message(frames, signer, replay, second) == WireFault::replayed);
  SECTION("even from another routing identity") {
    auto rerouted = frames;
    rerouted.insert(rerouted.begin(), "attacker");
    WireMessage third;
    CHECK(parse_wire_message(rerouted, signer, replay, third) == WireFault::replayed);
  }
}

TEST_CASE("message with a bad signature does not use up a replay slot", "[wire]") {
  Signer signer("k");
  ReplayGuard replay;
  auto frames = signed_frames(signer, {kHeader, "{}", "{}", "{}"});
  auto forged = frames;
  forged[2] += " ";  // signature now wrong for the parts
  WireMessage msg;
  CHECK(parse_wire_message(forged, signer, replay, msg) == WireFault::bad_signature);
  CHECK(replay.size() == 0);
  CHECK(parse_wire_message(frames, signer, replay, msg) == WireFault::none);
}

TEST_CASE("message with a malformed JSON part is refused", "[wire]") {
  Signer signer("k");
  const std::vector<std::string> bad_parts = {"{",        "not json", "",   "[1,2]",
                                              "\"text\"", "42",       "{}}"};
  for (int slot = 0; slot < 4; ++slot) {
    for (auto& bad : bad_parts) {
      std::vector<std::string> parts = {kHeader, "{}", "{}", "{}"};
      parts[slot] = bad;
      INFO("part " << slot << " = " << bad);
      CHECK(parse(signed_frames(signer, parts), signer) == WireFault::bad_json);
    }
  }
}

TEST_CASE("message with JSON nested deeper than the limit is refused", "[wire]") {
  Signer signer("k");
  std::string at_limit = nested(kMaxJsonDepth), too_deep = nested(kMaxJsonDepth + 1);
  CHECK(parse(signed_frames(signer, {kHeader, "{}", "{}", at_limit}), signer) == WireFault::none);
  CHECK(parse(signed_frames(signer, {kHeader, "{}", "{}", too_deep}), signer) ==
        WireFault::bad_json);
  // Far past the limit: must not recurse the stack away.
  std::string very_deep = "{\"x\":" + std::string(1000000, '[') + "}";
  CHECK(parse(signed_frames(signer, {kHeader, "{}", "{}", very_deep}), signer) ==
        WireFault::bad_json);
  CHECK(parse(signed_frames(signer, {kHeader, too_deep, "{}", "{}"}), signer) ==
        WireFault::bad_json);
}

TEST_CASE("brackets inside strings do not count towards the depth", "[wire]") {
  Signer signer("k");
  std::string content =
      "{\"code\":\"" + std::string(500, '[') + "\\\"" + std::string(500, '{') + "\"}";
  WireMessage msg;
  REQUIRE(parse(signed_frames(signer, {kHeader, "{}", "{}", content}), signer, &msg) ==
          WireFault::none);
  CHECK(msg.content["code"].get<std::string>().size() == 1001);
}

TEST_CASE("header without msg_id, msg_type or session is refused", "[wire]") {
  Signer signer("k");
  const char* headers[] = {
      R"({"msg_id":"m","session":"s"})",
      R"({"msg_id":"m","msg_type":"execute_request"})",
      R"({"msg_type":"execute_request","session":"s"})",
      R"({"msg_id":"m","msg_type":"","session":"s"})",
      R"({"msg_id":"m","msg_type":7,"session":"s"})",
      R"({"msg_id":"m","msg_type":"execute_request","session":null})",
      R"({})",
  };
  for (const char* header : headers) {
    INFO(header);
    CHECK(parse(signed_frames(signer, {header, "{}", "{}", "{}"}), signer) ==
          WireFault::bad_header);
  }
}

TEST_CASE("identities and buffers are preserved", "[wire]") {
  Signer signer("k");
  std::vector<std::string> ids = {"router-a", std::string("\0\x01\xff", 3)};
  std::vector<std::string> buffers = {std::string("\0\0binary\xff", 9), "", "second"};
  WireMessage msg;
  REQUIRE(parse(signed_frames(signer, {kHeader, "{}", "{}", "{}"}, ids, buffers), signer, &msg) ==
          WireFault::none);
  CHECK(msg.identities == ids);
  CHECK(msg.buffers == buffers);
}

TEST_CASE("serialised message parses back with the same signer", "[wire]") {
  Signer signer("round-trip-key");
  WireMessage sent;
  sent.identities = {"id-1", "id-2"};
  sent.header = make_header("execute_reply", "session-42");
  sent.parent_header = {{"msg_id", "parent"}, {"msg_type", "execute_request"}};
  sent.metadata = {{"started", "now"}};
  sent.content = {{"status", "ok"}, {"execution_count", 3}, {"text", "é ∑ \xf0\x9f\x99\x82"}};
  sent.buffers = {std::string("\x00\x01", 2)};

  auto frames = serialize_wire_message(sent, signer);
  REQUIRE(frames.size() == 2 + 1 + 1 + 4 + 1);
  CHECK(frames[2] == kDelimiter);

  ReplayGuard replay;
  WireMessage received;
  REQUIRE(parse_wire_message(frames, signer, replay, received) == WireFault::none);
  CHECK(received.identities == sent.identities);
  CHECK(received.header == sent.header);
  CHECK(received.parent_header == sent.parent_header);
  CHECK(received.metadata == sent.metadata);
  CHECK(received.content == sent.content);
  CHECK(received.buffers == sent.buffers);

  Signer other("another-key");
  WireMessage refused;
  ReplayGuard fresh;
  CHECK(parse_wire_message(frames, other, fresh, refused) == WireFault::bad_signature);
}

TEST_CASE("make_header fills in what the protocol requires", "[wire]") {
  auto header = make_header("status", "sess");
  CHECK(header["msg_type"] == "status");
  CHECK(header["session"] == "sess");
  CHECK(header["version"] == kProtocolVersion);
  CHECK(header["msg_id"].get<std::string>().size() == 36);
  CHECK(make_header("status", "sess")["msg_id"] != header["msg_id"]);
  std::string date = header["date"];
  CHECK(date.size() == 27);  // 2026-01-02T03:04:05.678901Z
  CHECK(date.back() == 'Z');
  CHECK(date[10] == 'T');
}

TEST_CASE("new_uuid is a version-4 UUID", "[wire]") {
  std::string id = new_uuid();
  REQUIRE(id.size() == 36);
  CHECK(id[8] == '-');
  CHECK(id[13] == '-');
  CHECK(id[14] == '4');
  CHECK(std::string("89ab").find(id[19]) != std::string::npos);
}

TEST_CASE("every wire fault has a description", "[wire]") {
  for (auto fault :
       {WireFault::none, WireFault::no_delimiter, WireFault::too_few_frames,
        WireFault::bad_signature, WireFault::replayed, WireFault::bad_json, WireFault::bad_header})
    CHECK(std::string(describe(fault)) != "unknown");
}

TEST_CASE("bounded JSON parse reports why it refused", "[wire][json]") {
  std::string why;
  CHECK_FALSE(parse_bounded_json(nested(kMaxJsonDepth + 1), &why));
  CHECK_THAT(why, Catch::Contains("nested deeper"));
  why.clear();
  CHECK_FALSE(parse_bounded_json("{", &why));
  CHECK_THAT(why, Catch::Contains("malformed"));
  CHECK(parse_bounded_json("[1]", nullptr) == nlohmann::json::array({1}));
}

TEST_CASE("dump_json replaces invalid UTF-8 instead of throwing", "[wire][json]") {
  nlohmann::json value = {{"text", std::string("ok\xff\xfe", 4)}};
  std::string out;
  REQUIRE_NOTHROW(out = dump_json(value));
  CHECK(out == "{\"text\":\"ok\xef\xbf\xbd\xef\xbf\xbd\"}");
}
