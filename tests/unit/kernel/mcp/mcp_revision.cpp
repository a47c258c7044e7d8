// The MCP revisions as one table: what each carries, how initialize and a request's _meta pick
// one, and what tools/list shows each.
#include "kernel/mcp/mcp_revision.hpp"

#include <catch2/catch.hpp>

#include "kernel/mcp/mcp_tools.hpp"

using namespace belljar;
using json = nlohmann::json;

TEST_CASE("every revision spoken, newest first, and what it carries", "[mcp_revision]") {
  CHECK(mcp_versions() == std::vector<std::string>{"2026-07-28", "2025-11-25", "2025-06-18",
                                                   "2025-03-26", "2024-11-05"});
  const McpRevision& modern = *mcp_revision("2026-07-28");
  CHECK_FALSE(modern.handshake);
  CHECK(modern.tagged_results);
  CHECK(mcp_revision("2025-11-25")->icons);
  CHECK_FALSE(mcp_revision("2025-06-18")->icons);
  CHECK(mcp_revision("2025-06-18")->structured);
  CHECK_FALSE(mcp_revision("2025-03-26")->structured);
  CHECK_FALSE(mcp_revision("2024-11-05")->annotations);
  for (const auto& revision : mcp_revisions())
    CHECK(revision.tagged_results == !revision.handshake);  // the two eras
  CHECK_FALSE(mcp_revision("2025-11-26"));
}

TEST_CASE("a request names its revision in _meta, or does not", "[mcp_revision]") {
  CHECK_FALSE(revision_named_in(json::object()));
  CHECK_FALSE(revision_named_in({{"_meta", {{"progressToken", 1}}}}));
  CHECK_FALSE(revision_named_in({{"_meta", "2026-07-28"}}));
  auto named = revision_named_in({{"_meta", {{kMcpVersionKey, "2026-07-28"}}}});
  REQUIRE(named);
  REQUIRE(named->revision);
  CHECK(named->revision->version == "2026-07-28");
  named = revision_named_in({{"_meta", {{kMcpVersionKey, "2027-01-01"}}}});
  REQUIRE(named);
  CHECK_FALSE(named->revision);
  CHECK(named->unsupported == "2027-01-01");
  named = revision_named_in({{"_meta", {{kMcpVersionKey, 20260728}}}});
  REQUIRE(named);
  CHECK_FALSE(named->revision);
  CHECK(named->unsupported == "20260728");
}

TEST_CASE("tools/list shows each revision only its own fields", "[mcp_revision]") {
  Policy policy;
  for (const auto& revision : mcp_revisions()) {
    INFO(revision.version);
    json tools = mcp_tool_list(policy, revision);
    REQUIRE(tools.size() == 9);
    for (const auto& tool : tools) {
      CHECK(tool.contains("title") == revision.structured);
      CHECK(tool.contains("annotations") == revision.annotations);
      CHECK(tool.contains("icons") == revision.icons);
      if (tool["name"] == "run_python") CHECK(tool.contains("outputSchema") == revision.structured);
    }
    json info = mcp_server_info(revision);
    CHECK(info.contains("title") == revision.structured);
    CHECK(info.contains("icons") == revision.icons);
  }
  json icon = mcp_server_info(*mcp_revision("2025-11-25"))["icons"][0];
  CHECK(icon["mimeType"] == "image/svg+xml");
  CHECK(icon["src"].get<std::string>().rfind("data:image/svg+xml;base64,", 0) == 0);
}
