#pragma once
// The MCP revisions `belljar mcp` speaks and what each one carries, in one table. Revisions are
// an enumerated set, not an ordered scalar (a future identifier need not be a date), so nothing
// here compares version strings: a message's shape is asked of its revision's row.
//
// Two eras. Through 2025-11-25 a client picks its revision once, by `initialize`. From 2026-07-28
// each request names its revision in `_meta` ("io.modelcontextprotocol/protocolVersion"), with
// no handshake (`server/discover` says what the server speaks), and every result is tagged with
// `resultType`. A request that names a revision this server does not speak is answered -32022,
// naming every revision it does.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace belljar {

struct McpRevision {
  std::string_view version;
  bool handshake;       // reached by initialize; else named per request (stateless)
  bool annotations;     // tool annotations (readOnlyHint ...) and progress messages
  bool structured;      // tool titles, outputSchema, structuredContent, serverInfo.title
  bool icons;           // icons on tools and on serverInfo
  bool tagged_results;  // resultType on every result; ttlMs and cacheScope where cacheable
  bool tasks;           // task-augmented tools/call, tasks/get, result, list, cancel
};

// Every revision spoken, newest first.
const std::vector<McpRevision>& mcp_revisions();
const McpRevision* mcp_revision(std::string_view version);
// What initialize answers: the client's revision when it is a handshake one spoken here, else
// the newest handshake revision (the client then decides whether it can go on).
const McpRevision& negotiate_mcp_revision(const nlohmann::json& requested);
// Every version spoken, for -32022's `supported` and server/discover's `supportedVersions`.
std::vector<std::string> mcp_versions();

// The _meta key a 2026-07-28 request names its revision under.
inline constexpr const char* kMcpVersionKey = "io.modelcontextprotocol/protocolVersion";

// The revision a request's params name in `_meta`, if they name one: the revision, or the
// unsupported version as given (a string, or the JSON text of anything else).
struct NamedRevision {
  const McpRevision* revision = nullptr;  // null: `unsupported` says what was asked
  std::string unsupported;
};
std::optional<NamedRevision> revision_named_in(const nlohmann::json& params);
// The -32022 answer to request `id` that named `unsupported`: every version spoken, in `data`.
nlohmann::json unsupported_revision_error(const nlohmann::json& id, const std::string& unsupported);

}  // namespace belljar
