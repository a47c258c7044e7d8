// Connection file: the ports and key Jupyter hands the kernel, and the one-line errors for bad
// ones.
#include "kernel/protocol/connection_file.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "sandbox/policy/policy.hpp"

using namespace belljar;
using nlohmann::json;

namespace {

json valid_doc() {
  return {{"transport", "tcp"},      {"ip", "127.0.0.1"},     {"shell_port", 50001},
          {"iopub_port", 50002},     {"stdin_port", 50003},   {"control_port", 50004},
          {"hb_port", 50005},        {"key", "a0b1c2d3-key"}, {"signature_scheme", "hmac-sha256"},
          {"kernel_name", "belljar"}};
}

// The UsageError message for a document, or "" if it parsed.
std::string error_for(const std::string& text) {
  try {
    parse_connection_info(text, "/tmp/kernel-x.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string error_for_doc(const json& doc) {
  return error_for(doc.dump());
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/belljar-conn-XXXXXX";
    int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    path = name;
    std::ofstream(path) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE("connection file with tcp endpoints parses", "[connection]") {
  auto info = parse_connection_info(valid_doc().dump(), "k.json");
  CHECK(info.transport == "tcp");
  CHECK(info.ip == "127.0.0.1");
  CHECK(info.shell_port == 50001);
  CHECK(info.iopub_port == 50002);
  CHECK(info.stdin_port == 50003);
  CHECK(info.control_port == 50004);
  CHECK(info.hb_port == 50005);
  CHECK(info.key == "a0b1c2d3-key");
  CHECK(info.signature_scheme == "hmac-sha256");
  CHECK(info.endpoint(info.shell_port) == "tcp://127.0.0.1:50001");
}

TEST_CASE("connection file with an IPv6 address brackets it in the endpoint", "[connection]") {
  auto doc = valid_doc();
  doc["ip"] = "::1";
  auto info = parse_connection_info(doc.dump(), "k.json");
  CHECK(info.endpoint(5555) == "tcp://[::1]:5555");
}

TEST_CASE("connection file with ipc transport names path-port endpoints", "[connection]") {
  auto doc = valid_doc();
  doc["transport"] = "ipc";
  doc["ip"] = "/run/user/1000/kernel-abc";
  auto info = parse_connection_info(doc.dump(), "k.json");
  CHECK(info.transport == "ipc");
  CHECK(info.endpoint(info.hb_port) == "ipc:///run/user/1000/kernel-abc-50005");
}

TEST_CASE("connection file defaults transport, ip and scheme", "[connection]") {
  auto doc = valid_doc();
  doc.erase("transport");
  doc.erase("ip");
  doc.erase("signature_scheme");
  auto info = parse_connection_info(doc.dump(), "k.json");
  CHECK(info.transport == "tcp");
  CHECK(info.ip == "127.0.0.1");
  CHECK(info.signature_scheme == "hmac-sha256");
}

TEST_CASE("connection file read from disk parses", "[connection]") {
  TempFile file(valid_doc().dump(2));
  auto info = read_connection_file(file.path);
  CHECK(info.key == "a0b1c2d3-key");
  CHECK(info.control_port == 50004);
}

TEST_CASE("connection file errors name the file and the problem", "[connection]") {
  SECTION("missing key") {
    auto doc = valid_doc();
    doc.erase("key");
    auto why = error_for_doc(doc);
    CHECK_THAT(why, Catch::Contains("/tmp/kernel-x.json") && Catch::Contains("missing \"key\""));
  }
  SECTION("empty key: no unsigned messaging") {
    auto doc = valid_doc();
    doc["key"] = "";
    CHECK_THAT(error_for_doc(doc), Catch::Contains("empty \"key\""));
  }
  SECTION("key that is not a string") {
    auto doc = valid_doc();
    doc["key"] = 1234;
    CHECK_THAT(error_for_doc(doc), Catch::Contains("\"key\" must be a string"));
  }
  SECTION("unknown transport scheme") {
    auto doc = valid_doc();
    doc["transport"] = "udp";
    CHECK_THAT(error_for_doc(doc), Catch::Contains("transport \"udp\""));
  }
  SECTION("unsupported signature scheme") {
    auto doc = valid_doc();
    doc["signature_scheme"] = "hmac-md5";
    CHECK_THAT(error_for_doc(doc), Catch::Contains("hmac-md5"));
  }
  SECTION("empty ip") {
    auto doc = valid_doc();
    doc["ip"] = "";
    CHECK_THAT(error_for_doc(doc), Catch::Contains("\"ip\""));
  }
  SECTION("missing port") {
    for (const char* port : {"shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"}) {
      auto doc = valid_doc();
      doc.erase(port);
      CHECK_THAT(error_for_doc(doc), Catch::Contains(std::string("missing \"") + port + "\""));
    }
  }
  SECTION("bad port values") {
    for (json bad : {json(0), json(-1), json(65536), json(1e10), json(5555.5), json("5555"),
                     json(nullptr), json::array({5555})}) {
      auto doc = valid_doc();
      doc["hb_port"] = bad;
      INFO(bad.dump());
      CHECK_THAT(error_for_doc(doc), Catch::Contains("\"hb_port\" must be a port number"));
    }
  }
  SECTION("not JSON") {
    CHECK_THAT(error_for("shell_port = 5"), Catch::Contains("not a JSON object"));
    CHECK_THAT(error_for(""), Catch::Contains("not a JSON object"));
    CHECK_THAT(error_for("[1,2]"), Catch::Contains("not a JSON object"));
    CHECK_THAT(error_for(std::string(10000, '[')), Catch::Contains("not a JSON object"));
  }
  SECTION("missing file") {
    try {
      read_connection_file("/nonexistent/kernel-404.json");
      FAIL("no exception");
    } catch (const UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains("/nonexistent/kernel-404.json") &&
                               Catch::Contains("cannot be read"));
    }
  }
}

TEST_CASE("connection file errors are one line", "[connection]") {
  auto doc = valid_doc();
  doc.erase("key");
  CHECK(error_for_doc(doc).find('\n') == std::string::npos);
  CHECK(error_for("{").find('\n') == std::string::npos);
}

TEST_CASE("the edge port numbers are accepted", "[connection]") {
  auto doc = valid_doc();
  doc["shell_port"] = 1;
  doc["hb_port"] = 65535;
  auto info = parse_connection_info(doc.dump(), "k.json");
  CHECK(info.shell_port == 1);
  CHECK(info.hb_port == 65535);
}
