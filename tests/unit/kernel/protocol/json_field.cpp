// json_field: one field of a JSON object read without trusting its type (the worker's frames,
// replies and clients' requests all go through it).
#include "kernel/protocol/json_field.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>

using namespace belljar;

TEST_CASE("json_field returns the fallback for a field of another type, never throws",
          "[protocol][json_field]") {
  auto doc = nlohmann::json::parse(
      R"({"event": 7, "name": "ready", "pid": 42, "big": 9999999999, "neg": -1,
          "flag": true, "cpu": 1.5, "list": [1]})");
  CHECK(json_field(doc, "event", "") == "");  // nlohmann's value() throws here
  CHECK_THROWS(doc.value("event", ""));
  CHECK(json_field(doc, "name", "") == "ready");
  CHECK(json_field(doc, "missing", "dflt") == "dflt");
  CHECK(json_field<int>(doc, "pid", -1) == 42);
  CHECK(json_field<int>(doc, "big", -1) == -1);  // does not fit an int
  CHECK(json_field<int64_t>(doc, "big", -1) == 9999999999);
  CHECK(json_field<uint64_t>(doc, "neg", 0) == 0);  // negative: not an unsigned
  CHECK(json_field<int>(doc, "name", -1) == -1);
  CHECK(json_field(doc, "flag", false) == true);
  CHECK(json_field(doc, "pid", false) == false);
  CHECK(json_field(doc, "cpu", -1.0) == 1.5);
  CHECK(json_field(doc, "list", -1.0) == -1.0);
  CHECK(json_field(nlohmann::json::array(), "name", "x") == "x");  // not an object
}
