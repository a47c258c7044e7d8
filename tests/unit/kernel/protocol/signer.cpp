// Signer: HMAC-SHA256 as jupyter_client computes it, checked against fixed vectors.
#include "kernel/protocol/signer.hpp"

#include <catch2/catch.hpp>

using belljar::Signer;

// Expected digests from /usr/bin/python3:
//   hmac.new(KEY, b"".join(parts), hashlib.sha256).hexdigest()

TEST_CASE("signer matches the HMAC-SHA256 known answer", "[signer]") {
  Signer signer("key");
  // hmac.new(b"key", b"The quick brown fox jumps over the lazy dog", sha256)
  const char* expected = "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8";
  CHECK(signer.sign({"The quick brown fox jumps over the lazy dog"}) == expected);
}

TEST_CASE("signer hashes the parts as one concatenation", "[signer]") {
  Signer signer("belljar-test-key");
  // hmac.new(b"belljar-test-key", b'{"a":1}{}{}{"b":2}', sha256)
  const char* expected = "018400ae6281bd293bf72ca28901051dbcea75c67b7113ff11d3d061de1cabbb";
  CHECK(signer.sign({"{\"a\":1}", "{}", "{}", "{\"b\":2}"}) == expected);
  CHECK(signer.sign({"{\"a\":1}{}", "{}{\"b\":2}"}) == expected);
}

TEST_CASE("signer output is 64 lower-case hex digits", "[signer]") {
  Signer signer("k");
  std::string digest = signer.sign({"anything"});
  REQUIRE(digest.size() == 64);
  CHECK(digest.find_first_not_of("0123456789abcdef") == std::string::npos);
}

TEST_CASE("signer is reusable: the same parts sign the same twice", "[signer]") {
  // The keyed context is duplicated per message; a consumed context would change the second digest.
  Signer signer("key");
  std::string first = signer.sign({"a", "b"});
  signer.sign({"something else"});
  CHECK(signer.sign({"a", "b"}) == first);
}

TEST_CASE("signer with a different key gives a different digest", "[signer]") {
  Signer a("key-one"), b("key-two");
  CHECK(a.sign({"x"}) != b.sign({"x"}));
}

TEST_CASE("verify accepts the right signature and refuses any change", "[signer]") {
  Signer signer("key");
  const std::string good = "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8";
  const std::vector<std::string_view> parts = {"The quick brown fox jumps over the lazy dog"};
  CHECK(signer.verify(good, parts));

  SECTION("one hex digit changed") {
    for (size_t i = 0; i < good.size(); ++i) {
      std::string bad = good;
      bad[i] = bad[i] == '0' ? '1' : '0';
      CHECK_FALSE(signer.verify(bad, parts));
    }
  }
  SECTION("upper-case hex is not the digest jupyter_client sends") {
    std::string upper = good;
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK_FALSE(signer.verify(upper, parts));
  }
  SECTION("truncated, extended and empty signatures") {
    CHECK_FALSE(signer.verify(good.substr(0, 63), parts));
    CHECK_FALSE(signer.verify(good + "0", parts));
    CHECK_FALSE(signer.verify("", parts));
  }
  SECTION("a changed part") {
    CHECK_FALSE(signer.verify(good, {"The quick brown fox jumps over the lazy cog"}));
  }
}
