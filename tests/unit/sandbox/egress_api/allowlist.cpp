// The egress proxy's pure parts: allowlist matching (wildcards, ports, literal addresses),
// which resolved addresses count as inside, and the HTTP heads it reads and rewrites.
#include "sandbox/egress_api/allowlist.hpp"

#include <catch2/catch.hpp>

#include "sandbox/egress/http_head.hpp"
#include "sandbox/egress_api/address_policy.hpp"
#include "sandbox/policy/policy.hpp"

using namespace belljar;

namespace {

HostRule rule(const std::string& text, bool local = false) {
  HostRule r = parse_host_rule(local ? "--allow-local-net" : "--allow-net", text);
  r.local = local;
  return r;
}

HostVerdict::Kind verdict(const std::vector<HostRule>& rules, const std::string& host,
                          uint16_t port) {
  auto normal = normalize_host(host);
  REQUIRE(normal);
  return match_host(rules, *normal, port).kind;
}

constexpr auto allowed = HostVerdict::Kind::allowed;
constexpr auto host_not_allowed = HostVerdict::Kind::host_not_allowed;
constexpr auto port_not_allowed = HostVerdict::Kind::port_not_allowed;

}  // namespace

TEST_CASE("an exact rule matches that name only, in any case and with a trailing dot", "[egress]") {
  std::vector<HostRule> rules = {rule("pypi.org")};
  CHECK(verdict(rules, "pypi.org", 443) == allowed);
  CHECK(verdict(rules, "PyPI.Org", 80) == allowed);
  CHECK(verdict(rules, "pypi.org.", 443) == allowed);
  CHECK(verdict(rules, "files.pypi.org", 443) == host_not_allowed);
  CHECK(verdict(rules, "pypi.org.evil.com", 443) == host_not_allowed);
  CHECK(verdict(rules, "xpypi.org", 443) == host_not_allowed);
}

TEST_CASE("a wildcard rule matches subdomains at any depth but not the domain itself", "[egress]") {
  std::vector<HostRule> rules = {rule("*.example.com")};
  CHECK(verdict(rules, "api.example.com", 443) == allowed);
  CHECK(verdict(rules, "a.b.example.com", 80) == allowed);
  CHECK(verdict(rules, "example.com", 443) == host_not_allowed);
  CHECK(verdict(rules, "badexample.com", 443) == host_not_allowed);
  CHECK(verdict(rules, "example.com.evil.org", 443) == host_not_allowed);
  CHECK(verdict(rules, "93.184.216.34", 443) == host_not_allowed);
}

TEST_CASE("a rule without a port gives 80 and 443, and a port narrows it to that port",
          "[egress]") {
  std::vector<HostRule> rules = {rule("example.com"), rule("api.example.org:8443")};
  CHECK(verdict(rules, "example.com", 80) == allowed);
  CHECK(verdict(rules, "example.com", 443) == allowed);
  CHECK(verdict(rules, "example.com", 8080) == port_not_allowed);
  CHECK(verdict(rules, "api.example.org", 8443) == allowed);
  CHECK(verdict(rules, "api.example.org", 443) == port_not_allowed);
  auto v = match_host(rules, *normalize_host("example.com"), 22);
  CHECK(v.allowed_ports == std::vector<uint16_t>{80, 443});
}

TEST_CASE("a literal-address rule matches that address in any spelling, never a name", "[egress]") {
  std::vector<HostRule> rules = {rule("127.0.0.1:8765"), rule("[::1]:8080"), rule("2001:db8::1")};
  CHECK(verdict(rules, "127.0.0.1", 8765) == allowed);
  CHECK(verdict(rules, "127.0.0.1", 8766) == port_not_allowed);
  CHECK(verdict(rules, "[::1]", 8080) == allowed);
  CHECK(verdict(rules, "[0:0:0:0:0:0:0:1]", 8080) == allowed);
  CHECK(verdict(rules, "[2001:DB8:0::1]", 443) == allowed);
  CHECK(verdict(rules, "localhost", 8765) == host_not_allowed);
  // Another spelling of 127.0.0.1 is not an address literal: it is a name no rule names.
  CHECK(verdict(rules, "127.1", 8765) == host_not_allowed);
  CHECK(verdict(rules, "[::ffff:127.0.0.1]", 8765) == host_not_allowed);
}

TEST_CASE("a local rule wins over a plain one for the same host and port", "[egress]") {
  std::vector<HostRule> rules = {rule("db.internal:5432"), rule("db.internal:5432", true)};
  auto v = match_host(rules, *normalize_host("db.internal"), 5432);
  REQUIRE(v.kind == allowed);
  CHECK(v.rule->local);
  CHECK(rule_flag_text(*v.rule) == "--allow-local-net db.internal:5432");
  CHECK(rule_flag_text(rules[0]) == "--allow-net db.internal:5432");
}

TEST_CASE("hosts that are neither names nor addresses are refused by normalisation", "[egress]") {
  for (const char* bad :
       {"", "exa mple.com", "example.com%00", "evil.com\\@good.com", "a..b", ".a", "-",
        "[127.0.0.1]", "[fe80::1%eth0]", "under_score.com", "a.b..", "é.com"}) {
    INFO(bad);
    if (std::string(bad) == "-") {
      CHECK(normalize_host(bad));  // a one-label name: harmless, it matches no rule
      continue;
    }
    CHECK_FALSE(normalize_host(bad));
  }
  CHECK(normalize_host(std::string(63, 'a') + ".com"));
  CHECK_FALSE(normalize_host(std::string(64, 'a') + ".com"));
}

TEST_CASE("addresses inside are told apart from public ones", "[egress]") {
  struct Row {
    const char* address;
    AddressScope scope;
  };
  const Row rows[] = {
      {"93.184.216.34", AddressScope::public_unicast},
      {"8.8.8.8", AddressScope::public_unicast},
      {"127.0.0.1", AddressScope::loopback},
      {"127.255.0.9", AddressScope::loopback},
      {"0.0.0.0", AddressScope::unspecified},
      {"0.1.2.3", AddressScope::unspecified},
      {"10.1.2.3", AddressScope::private_network},
      {"172.16.0.1", AddressScope::private_network},
      {"172.31.255.255", AddressScope::private_network},
      {"172.32.0.1", AddressScope::public_unicast},
      {"192.168.1.1", AddressScope::private_network},
      {"100.64.0.1", AddressScope::shared},
      {"100.128.0.1", AddressScope::public_unicast},
      {"169.254.169.254", AddressScope::link_local},
      {"224.0.0.1", AddressScope::multicast},
      {"239.255.255.250", AddressScope::multicast},
      {"255.255.255.255", AddressScope::broadcast},
      {"240.0.0.1", AddressScope::reserved},
      {"192.0.2.10", AddressScope::reserved},
      {"198.18.0.1", AddressScope::reserved},
      {"2606:4700::6810:84e5", AddressScope::public_unicast},
      {"::1", AddressScope::loopback},
      {"::", AddressScope::unspecified},
      {"fe80::1", AddressScope::link_local},
      {"fd00::1", AddressScope::private_network},
      {"fc00::1", AddressScope::private_network},
      {"ff02::1", AddressScope::multicast},
      {"2001:db8::1", AddressScope::reserved},
      {"::ffff:127.0.0.1", AddressScope::loopback},
      {"::ffff:169.254.169.254", AddressScope::link_local},
      {"::ffff:8.8.8.8", AddressScope::public_unicast},
      {"64:ff9b::a00:1", AddressScope::private_network},  // NAT64 of 10.0.0.1
      {"2002:7f00:1::1", AddressScope::loopback},         // 6to4 of 127.0.0.1
      {"::127.0.0.1", AddressScope::reserved},            // IPv4-compatible, deprecated
  };
  for (const auto& row : rows) {
    INFO(row.address);
    auto address = IpAddress::parse(row.address);
    REQUIRE(address);
    CHECK(classify(*address) == row.scope);
  }
  CHECK(describe_scope(AddressScope::loopback) == "a loopback address");
  CHECK_FALSE(IpAddress::parse("127.1"));
  CHECK_FALSE(IpAddress::parse("fe80::1%eth0"));
  CHECK(IpAddress::parse("0:0::1")->text() == "::1");
}

TEST_CASE("CONNECT and absolute-form requests are parsed", "[egress]") {
  auto connect = parse_request_head(
      "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n");
  CHECK(connect.tunnel);
  CHECK(connect.host == "api.example.com");
  CHECK(connect.port == 443);

  auto v6 = parse_request_head("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n");
  CHECK(v6.host == "[::1]");
  CHECK(v6.port == 8443);

  auto get = parse_request_head(
      "GET http://Example.com:8080/a/b?c=1#frag HTTP/1.1\r\nHost: example.com:8080\r\n\r\n");
  CHECK_FALSE(get.tunnel);
  CHECK(get.host == "Example.com");
  CHECK(get.port == 8080);
  CHECK(get.path == "/a/b?c=1");

  CHECK(parse_request_head("GET http://example.com HTTP/1.0\r\n\r\n").path == "/");
  CHECK(parse_request_head("GET http://example.com?q HTTP/1.1\r\n\r\n").path == "/?q");
  CHECK(parse_request_head("GET HTTP://example.com/ HTTP/1.1\r\n\r\n").port == 80);
}

TEST_CASE("malformed and smuggling-shaped request heads are refused", "[egress]") {
  const char* bad[] = {
      "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",  // origin-form: not a proxy request
      "GET https://example.com/ HTTP/1.1\r\n\r\n",    // TLS must come through CONNECT
      "CONNECT example.com HTTP/1.1\r\n\r\n",         // no port
      "CONNECT example.com:0 HTTP/1.1\r\n\r\n",
      "CONNECT example.com:99999 HTTP/1.1\r\n\r\n",
      "GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n",  // credentials / host confusion
      "GET http://good.com@evil.com/ HTTP/1.1\r\n\r\n",
      "GET http://::1/ HTTP/1.1\r\n\r\n",           // IPv6 without brackets
      "GET  http://example.com/ HTTP/1.1\r\n\r\n",  // double space
      "GET http://example.com/ HTTP/2.0\r\n\r\n",
      "GET http://example.com/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",  // obsolete folding
      "GET http://example.com/ HTTP/1.1\r\nX : a\r\n\r\n",            // space before the colon
      "GET http://example.com/ HTTP/1.1\r\nX: a\rb\r\n\r\n",          // bare CR
      "GET http://example.com/ HTTP/1.1\nX: a\r\n\r\n",               // bare LF
      "POST http://example.com/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: "
      "chunked\r\n\r\n",
      "G\x01T http://example.com/ HTTP/1.1\r\n\r\n",
  };
  for (const char* head : bad) {
    INFO(head);
    CHECK_THROWS_AS(parse_request_head(head), HttpHeadError);
  }
}

TEST_CASE("the head sent upstream is origin-form, without hop-by-hop headers, and closes",
          "[egress]") {
  auto request = parse_request_head(
      "POST http://example.com/api?x=1 HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: "
      "keep-alive\r\n"
      "Proxy-Authorization: Basic Zm9v\r\nConnection: keep-alive, X-Secret-Hop\r\nX-Secret-Hop: "
      "1\r\n"
      "Keep-Alive: timeout=5\r\nContent-Length: 2\r\nUpgrade: websocket\r\n\r\n");
  std::string head = upstream_request_head(request);
  CHECK(head.rfind("POST /api?x=1 HTTP/1.1\r\n", 0) == 0);
  CHECK(head.find("Host: example.com\r\n") != std::string::npos);
  CHECK(head.find("Content-Length: 2\r\n") != std::string::npos);
  for (const char* gone : {"Proxy-", "keep-alive", "X-Secret-Hop", "Keep-Alive", "Upgrade"}) {
    INFO(gone);
    CHECK(head.find(gone) == std::string::npos);
  }
  const std::string closing = "\r\nConnection: close\r\n\r\n";
  REQUIRE(head.size() >= closing.size());
  CHECK(head.substr(head.size() - closing.size()) == closing);

  auto no_host = parse_request_head("GET http://example.com:8080/ HTTP/1.0\r\n\r\n");
  CHECK(upstream_request_head(no_host).find("Host: example.com:8080\r\n") != std::string::npos);
}

TEST_CASE("the response head is given Connection: close", "[egress]") {
  auto response = parse_response_head(
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\nKeep-Alive: "
      "timeout=5\r\n\r\n");
  CHECK(response.status == 200);
  CHECK(response.reason == "OK");
  std::string head = client_response_head(response);
  CHECK(head == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n");
  CHECK(find_head_end("HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody") == size_t(25));
  CHECK_FALSE(find_head_end("HTTP/1.1 200 OK\r\nA: b\r\n"));
  CHECK_THROWS_AS(parse_response_head("SSH-2.0-OpenSSH\r\n\r\n"), HttpHeadError);
}

// Found by fuzz_http_head: "099" parsed, then went to the client as "HTTP/1.1 99 OK".
TEST_CASE("a status code outside 100-599 is refused", "[egress]") {
  for (const char* code : {"000", "099", "600", "999"})
    CHECK_THROWS_AS(parse_response_head(std::string("HTTP/1.1 ") + code + " OK\r\n\r\n"),
                    HttpHeadError);
  CHECK(parse_response_head("HTTP/1.1 100 Continue\r\n\r\n").status == 100);
  CHECK(parse_response_head("HTTP/1.1 599 X\r\n\r\n").status == 599);
}

TEST_CASE("the proxy's own responses say what happened and close", "[egress]") {
  std::string r =
      proxy_response(403, "Forbidden", "no\n", {{"X-Belljar-Denied", "not-allowlisted"}});
  CHECK(r ==
        "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\n"
        "X-Belljar-Denied: not-allowlisted\r\nConnection: close\r\n\r\nno\n");
}

TEST_CASE("flag --allow-local-net allows a host like --allow-net and marks it local", "[egress]") {
  PolicyBuilder builder;
  std::vector<std::string> args = {"--allow-net", "pypi.org", "--allow-local-net", "db.lan:5432",
                                   "--allow-local-net=localhost"};
  for (size_t i = 0; i < args.size();) {
    int used = builder.take(args, i);
    REQUIRE(used > 0);
    i += static_cast<size_t>(used);
  }
  Policy policy = builder.build();
  REQUIRE(policy.allow_net.size() == 3);
  CHECK_FALSE(policy.allow_net[0].local);
  CHECK(policy.allow_net[1].local);
  CHECK(policy.allow_net[1].ports == std::vector<uint16_t>{5432});
  CHECK(policy.allow_net[2].local);
  CHECK(policy.allow_net[2].ports == std::vector<uint16_t>{80, 443});
  CHECK(policy.summary()["allow_net"] ==
        nlohmann::json::array({"pypi.org", "db.lan:5432 (local)", "localhost (local)"}));
  bool documented = false;
  for (auto& [usage, meaning] : policy_flag_help())
    documented = documented || usage.rfind("--allow-local-net ", 0) == 0;
  CHECK(documented);
}
