// The secret broker's HTTP/1.1 rewriting, bytes in and bytes out: values put into requests,
// taken out of responses (split reads included), framing kept so keep-alive and pipelining
// agree with upstream, and what it refuses.
#include "sandbox/egress/brokered_http.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace belljar;

namespace {

const char* kValue = "sk-the-real-value-0123456789";

std::shared_ptr<const BoundSecrets> secrets() {
  static std::string entry = std::string("API_KEY=") + kValue;
  static const char* env[] = {entry.c_str(), nullptr};
  SecretBinding binding = parse_secret_binding("--secret", "API_KEY@api.example.com", false);
  return BoundSecrets::load({binding}, env);
}

struct Broker {
  std::shared_ptr<const BoundSecrets> all = secrets();
  BrokeredHttp http{{&all->all().front()}, *all, "api.example.com"};
  const std::string& placeholder() const { return all->all().front().placeholder; }

  // Everything the client sends, in pieces of `piece` bytes; what upstream gets.
  std::string request(const std::string& bytes, size_t piece = SIZE_MAX) {
    std::string in, out;
    for (size_t at = 0; at < bytes.size(); at += piece) {
      in += bytes.substr(at, piece);
      auto refused = http.from_client(in, out);
      REQUIRE_FALSE(refused);
    }
    return out;
  }
  std::string response(const std::string& bytes, size_t piece = SIZE_MAX, bool close = false) {
    std::string in, out;
    for (size_t at = 0; at < bytes.size(); at += piece) {
      in += bytes.substr(at, piece);
      auto refused = http.from_upstream(in, out, close && at + piece >= bytes.size());
      REQUIRE_FALSE(refused);
    }
    return out;
  }
};

// The body of a chunked message, its chunks joined.
std::string unchunk(const std::string& message) {
  std::string body;
  auto head_end = message.find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  ChunkedBody chunks;
  size_t used = chunks.feed(std::string_view(message).substr(head_end + 4), &body);
  CHECK(chunks.done());
  CHECK(used == message.size() - head_end - 4);
  return body;
}

}  // namespace

TEST_CASE("a placeholder in any header value becomes the value, the target keeps it") {
  Broker b;
  std::string out = b.request("POST /v1/chat?key=" + b.placeholder() + " HTTP/1.1\r\n" +
                              "Host: elsewhere.example.net\r\n"
                              "Authorization: Bearer " +
                              b.placeholder() + "\r\n" + "x-api-key: " + b.placeholder() + "\r\n" +
                              "Accept-Encoding: gzip, br\r\n"
                              "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
                              "Content-Length: 4\r\n\r\nbody");
  CHECK(out.rfind("POST /v1/chat?key=" + b.placeholder() + " HTTP/1.1\r\n", 0) == 0);
  CHECK(out.find(std::string("Authorization: Bearer ") + kValue + "\r\n") != std::string::npos);
  CHECK(out.find(std::string("x-api-key: ") + kValue + "\r\n") != std::string::npos);
  // The tunnel's host, whatever the client wrote; an encoding the proxy can read back.
  CHECK(out.find("Host: api.example.com\r\n") != std::string::npos);
  CHECK(out.find("elsewhere") == std::string::npos);
  CHECK(out.find("Accept-Encoding: identity\r\n") != std::string::npos);
  CHECK(out.find("gzip") == std::string::npos);
  CHECK(out.find("Proxy-Authorization") == std::string::npos);
  CHECK(out.find(b.placeholder(), 1) == out.find(b.placeholder()));  // the target's only
  CHECK(out.substr(out.size() - 8) == "\r\n\r\nbody");
}

TEST_CASE(
    "request bodies pass unchanged and keep-alive requests are each rewritten, split or not") {
  for (size_t piece : {size_t(1), size_t(7), SIZE_MAX}) {
    Broker b;
    std::string p = b.placeholder();
    std::string first = "POST /a HTTP/1.1\r\nAuthorization: " + p +
                        "\r\nTransfer-Encoding: chunked\r\n\r\n" + "5\r\nhello\r\n0\r\n\r\n";
    // The chunked body ends at "0\r\n\r\n"; a second request follows on the connection, its
    // body holding the placeholder, which a body keeps (only heads are rewritten).
    std::string second = "POST /b HTTP/1.1\r\nx-api-key: " + p +
                         "\r\nContent-Length: " + std::to_string(p.size()) + "\r\n\r\n" + p;
    std::string third = "GET /c HTTP/1.1\r\nAuthorization: " + p + "\r\n\r\n";
    std::string out = b.request(first + second + third, piece);
    INFO("piece " << piece);
    CHECK(out.find("5\r\nhello\r\n0\r\n\r\nPOST /b HTTP/1.1\r\n") != std::string::npos);
    CHECK(out.find(std::string("x-api-key: ") + kValue) != std::string::npos);
    CHECK(out.find("\r\n\r\n" + p + "GET /c HTTP/1.1\r\n") != std::string::npos);
    CHECK(out.find(std::string("Authorization: ") + kValue) != std::string::npos);
    CHECK(b.http.in_flight());
  }
}

TEST_CASE("a value coming back is replaced by its placeholder, split across reads or chunks") {
  for (size_t piece : {size_t(1), size_t(5), SIZE_MAX}) {
    Broker b;
    b.request("GET /echo HTTP/1.1\r\nAuthorization: Bearer " + b.placeholder() + "\r\n\r\n");
    std::string body = std::string("{\"seen\": \"Bearer ") + kValue + "\", \"again\": \"" + kValue +
                       kValue + "\"}";
    std::string upstream =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Echo: " + std::string(kValue) +
        "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    INFO("piece " << piece);
    std::string out = b.response(upstream, piece);
    CHECK(out.find(kValue) == std::string::npos);
    CHECK(out.find("X-Echo: " + b.placeholder() + "\r\n") != std::string::npos);
    // Re-framed: the length changed.
    CHECK(out.find("Content-Length") == std::string::npos);
    CHECK(out.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
    std::string p = b.placeholder();
    CHECK(unchunk(out) == "{\"seen\": \"Bearer " + p + "\", \"again\": \"" + p + p + "\"}");
    auto finished = b.http.take_finished();
    REQUIRE(finished.size() == 1);
    CHECK(finished[0].method == "GET");
    CHECK(finished[0].use.injected);
    CHECK(finished[0].use.status == 200);
    CHECK(finished[0].use.secrets == std::vector<std::string>{"API_KEY"});
    CHECK_FALSE(b.http.in_flight());
  }
}

TEST_CASE("a chunked response with the value across chunk boundaries, and a redirect") {
  Broker b;
  b.request("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
  std::string value(kValue);
  REQUIRE(value.size() - 7 == 0x15);
  std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n" +
                        value.substr(0, 4) + "\r\n3;ext=1\r\n" + value.substr(4, 3) + "\r\n15\r\n" +
                        value.substr(7) + "\r\n0\r\nX-Trailer: " + value + "\r\n\r\n";
  std::string redirect = "HTTP/1.1 302 Found\r\nLocation: https://x.example/?k=" + value +
                         "\r\nContent-Length: 0\r\n\r\n";
  std::string out = b.response(chunked + redirect, 3);
  CHECK(out.find(kValue) == std::string::npos);
  CHECK(out.find("X-Trailer") == std::string::npos);  // trailers are dropped
  CHECK(out.find("Location: https://x.example/?k=" + b.placeholder()) != std::string::npos);
  CHECK(b.http.take_finished().size() == 2);
}

TEST_CASE("bodiless responses, interim heads and a body that ends when upstream closes") {
  Broker b;
  b.request(
      "HEAD /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: "
      "0\r\n\r\nGET /c HTTP/1.1\r\n\r\n");
  std::string out = b.response(
      "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"  // HEAD: no body follows
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
      "HTTP/1.1 200 OK\r\n\r\nuntil close " +
          std::string(kValue),
      SIZE_MAX, true);
  // A HEAD's length is the length of the body it would have had: never passed (an echo's would
  // give away a value's length).
  CHECK(out.find("Content-Length") == std::string::npos);
  CHECK(out.find("HTTP/1.1 100 Continue\r\n") != std::string::npos);
  CHECK(out.find("HTTP/1.1 204 No Content\r\n") != std::string::npos);
  CHECK(out.find("Connection: close\r\n") != std::string::npos);
  CHECK(out.find(kValue) == std::string::npos);
  CHECK(b.http.take_finished().size() == 3);
  CHECK(b.http.closing());
}

TEST_CASE("token usage is read from JSON bodies and from the events of a stream") {
  Broker b;
  b.request(
      "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
      "POST /v1/messages HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  std::string json = R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}})";
  std::string events =
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
      "{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":"
      "15}}\n\ndata: [DONE]\n\n";
  b.response("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                 std::to_string(json.size()) + "\r\n\r\n" + json +
                 "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: " +
                 std::to_string(events.size()) + "\r\n\r\n" + events,
             9);
  auto finished = b.http.take_finished();
  REQUIRE(finished.size() == 2);
  CHECK(finished[0].use.input_tokens == 12u);
  CHECK(finished[0].use.output_tokens == 34u);
  CHECK_FALSE(finished[0].use.injected);
  CHECK(finished[1].use.input_tokens == 25u);
  CHECK(finished[1].use.output_tokens == 15u);
}

TEST_CASE("what the broker refuses to forward") {
  // Nothing goes upstream for a refused head; a body found malformed mid-way ends the
  // connection after its head went.
  auto refused = [](const std::string& bytes, bool head_went = false) {
    Broker b;
    std::string in = bytes, out;
    auto r = b.http.from_client(in, out);
    CHECK(out.empty() != head_went);
    return r;
  };
  auto r = refused("GET / HTTP/1.0\r\n\r\n");
  REQUIRE(r);
  CHECK(r->status == 505);
  r = refused("GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
  REQUIRE(r);
  CHECK(r->status == 501);
  r = refused("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
  REQUIRE(r);
  CHECK(r->status == 400);
  r = refused("GET http://other.example/ HTTP/1.1\r\n\r\n");
  REQUIRE(r);
  CHECK(r->status == 400);
  r = refused("GET / HTTP/1.1\r\nX: " + std::string(BrokeredHttp::kMaxHead, 'a'));
  REQUIRE(r);
  CHECK(r->status == 431);
  r = refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", true);
  REQUIRE(r);
  CHECK(r->status == 400);
}

TEST_CASE("a compressed or unframed response is refused before any of it reaches the client") {
  for (std::string head :
       {"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n"}) {
    Broker b;
    b.request("GET / HTTP/1.1\r\n\r\n");
    std::string in = head + "abc", out;
    auto r = b.http.from_upstream(in, out, false);
    INFO(head);
    REQUIRE(r);
    CHECK(r->status == 502);
    CHECK(r->failure == (head.find("gzip\r\nContent-Length") != std::string::npos
                             ? EgressFailure::compressed_response
                             : EgressFailure::upstream_response));
    CHECK(out.empty());
    CHECK_FALSE(b.http.mid_response());
  }
  Broker b;  // a response nobody asked for
  std::string in = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", out;
  CHECK(b.http.from_upstream(in, out, false));
}

TEST_CASE("no more than kMaxInFlight requests go upstream before their responses") {
  Broker b;
  std::string many;
  for (size_t i = 0; i < BrokeredHttp::kMaxInFlight + 5; ++i) many += "GET / HTTP/1.1\r\n\r\n";
  std::string in = many, out;
  REQUIRE_FALSE(b.http.from_client(in, out));
  CHECK(b.http.client_paused());
  CHECK(in.size() == 5 * std::string("GET / HTTP/1.1\r\n\r\n").size());
  std::string response = "HTTP/1.1 204 No Content\r\n\r\n", sent;
  REQUIRE_FALSE(b.http.from_upstream(response, sent, false));
  CHECK_FALSE(b.http.client_paused());
}

TEST_CASE("a large JSON body's usage is still read, from its end, without keeping it whole") {
  UsageReader reader("application/json; charset=utf-8");
  std::string body = R"({"choices": [{"message": {"content": ")" + std::string(3u << 20, 'x') +
                     R"("}}], "usage": {"prompt_tokens": 9, "completion_tokens": 1200}})";
  for (size_t at = 0; at < body.size(); at += 8192)
    reader.feed(std::string_view(body).substr(at, 8192));
  TokenUsage usage = reader.finish();
  CHECK(usage.input == 9u);
  CHECK(usage.output == 1200u);
  UsageReader plain("text/html");
  plain.feed(R"({"usage": {"prompt_tokens": 1}})");
  CHECK_FALSE(plain.finish().any());
}

TEST_CASE("a refusal never quotes what upstream sent, wherever it put the value") {
  // A bound host that reflects the request's headers into the very headers the broker refuses.
  std::string v(kValue);
  for (std::string head :
       {"HTTP/1.1 200 OK\r\nTransfer-Encoding: " + v + "\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Encoding: " + v + "\r\nContent-Length: 3\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: " + v + "\r\n\r\n",
        "HTTP/1.1 200 " + v + "\r\nX\r\n\r\n", "HTTP/1.1 101 " + v + "\r\n\r\n"}) {
    Broker b;
    b.request("GET / HTTP/1.1\r\nAuthorization: " + b.placeholder() + "\r\n\r\n");
    std::string in = head + "abc", out;
    auto r = b.http.from_upstream(in, out, false);
    INFO(head);
    REQUIRE(r);
    CHECK(r->status == 502);
    CHECK(std::string(r->why()).find(v.substr(0, 8)) == std::string::npos);
    CHECK(r->why() == BrokerRefusal(r->reason).why());  // the one spelling of its reason
    CHECK(out.empty());
  }
}

TEST_CASE("Range and If-Range never reach a bound host: slices would each pass the scrubber") {
  for (std::string header : {"Range: bytes=20-23", "If-Range: \"x\"", "range: bytes=-4"}) {
    Broker b;
    std::string in = "GET /echo HTTP/1.1\r\nAuthorization: " + b.placeholder() + "\r\n" + header +
                     "\r\n\r\n",
                out;
    auto r = b.http.from_client(in, out);
    INFO(header);
    REQUIRE(r);
    CHECK(r->status == 403);
    CHECK(r->reason == BrokerReason::range_request);
    CHECK(r->failure == EgressFailure::secret_unsupported);
    CHECK(std::string(r->why()).find("Range") != std::string::npos);
    CHECK(out.empty());
    CHECK_FALSE(b.http.in_flight());
  }
}

TEST_CASE("bodiless responses carry no length, range or digest of what upstream would send") {
  std::string v(kValue);
  Broker b;
  b.request(
      "HEAD /echo HTTP/1.1\r\n\r\nGET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n"
      "GET /c HTTP/1.1\r\n\r\n");
  std::string out = b.response(
      "HTTP/1.1 200 OK\r\nContent-Length: 9876543\r\nContent-Range: bytes 0-9876542/9876543\r\n"
      "Digest: sha-256=abc\r\nContent-MD5: abc\r\nX-Echo: " +
      v +
      "\r\n\r\n"
      "HTTP/1.1 204 No Content\r\nContent-Length: 7654321\r\n\r\n"
      "HTTP/1.1 304 Not Modified\r\nContent-Length: 8765432\r\nRepr-Digest: sha-256=:x:\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Digest: sha-256=:y:\r\n\r\n");
  CHECK(out.find("987654") == std::string::npos);
  CHECK(out.find("7654321") == std::string::npos);
  CHECK(out.find("8765432") == std::string::npos);
  CHECK(out.find("Content-Range") == std::string::npos);
  CHECK(out.find("igest") == std::string::npos);
  CHECK(out.find("Content-MD5") == std::string::npos);
  CHECK(out.find(kValue) == std::string::npos);
  CHECK(out.find("X-Echo: " + b.placeholder()) != std::string::npos);
  // An empty body that is not bodiless keeps its framing: the proxy's own zero.
  CHECK(out.substr(out.rfind("HTTP/1.1 200 OK")) == "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  CHECK(b.http.take_finished().size() == 4);
}
