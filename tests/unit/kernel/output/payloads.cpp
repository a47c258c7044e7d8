// execute_reply's payload from the worker: each item in its source's shape, or dropped.
#include "kernel/output/payloads.hpp"

#include <catch2/catch.hpp>

using namespace belljar;
using json = nlohmann::json;

TEST_CASE("payload items pass in the shape ipykernel gives their source", "[payloads]") {
  json sent = json::array({
      {{"source", "set_next_input"}, {"text", "x = 1\n"}, {"replace", true}, {"extra", 1}},
      {{"source", "set_next_input"}, {"text", "y"}},
      {{"source", "ask_exit"}, {"keepkernel", false}},
      {{"source", "page"}, {"data", {{"text/plain", "help"}}}, {"start", 3}},
      {{"source", "page"}, {"data", {{"text/plain", "help"}}}},
  });
  CheckedPayload checked = checked_payload(sent);
  CHECK(checked.dropped == 0);
  CHECK(checked.items == json::array({
                             {{"source", "set_next_input"}, {"text", "x = 1\n"}, {"replace", true}},
                             {{"source", "set_next_input"}, {"text", "y"}, {"replace", false}},
                             {{"source", "ask_exit"}, {"keepkernel", false}},
                             {{"source", "page"}, {"data", {{"text/plain", "help"}}}, {"start", 3}},
                             {{"source", "page"}, {"data", {{"text/plain", "help"}}}, {"start", 0}},
                         }));
}

TEST_CASE("payload items of another source or shape are dropped, never repaired", "[payloads]") {
  json sent = json::array({
      {{"source", "edit_magic"}, {"filename", "/etc/passwd"}},
      {{"source", "set_next_input"}, {"text", 7}},
      {{"source", "set_next_input"}},
      {{"source", "set_next_input"}, {"text", "x"}, {"replace", "yes"}},
      {{"source", "ask_exit"}, {"keepkernel", 1}},
      {{"source", "page"}, {"data", "help"}},
      {{"source", "page"}, {"data", json::object()}},
      {{"source", "page"}, {"data", {{"text/plain", "h"}}}, {"start", -1}},
      {{"text", "no source"}},
      "set_next_input",
  });
  CheckedPayload checked = checked_payload(sent);
  CHECK(checked.items == json::array());
  CHECK(checked.dropped == sent.size());
  CHECK(checked_payload(nullptr).dropped == 0);
  CHECK(checked_payload("not a list").dropped == 1);
}
