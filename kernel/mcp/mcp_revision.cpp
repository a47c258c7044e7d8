#include "kernel/mcp/mcp_revision.hpp"

#include "kernel/mcp/json_rpc.hpp"
#include "kernel/protocol/bounded_json.hpp"

namespace belljar {

using json = nlohmann::json;

const std::vector<McpRevision>& mcp_revisions() {
  // Tasks came with 2025-11-25 and left the core protocol with 2026-07-28 (an extension since).
  //                           handshake annotations structured icons tagged_results tasks
  static const std::vector<McpRevision> revisions = {
      {"2026-07-28", false, true, true, true, true, false},
      {"2025-11-25", true, true, true, true, false, true},
      {"2025-06-18", true, true, true, false, false, false},
      {"2025-03-26", true, true, false, false, false, false},
      {"2024-11-05", true, false, false, false, false, false},
  };
  return revisions;
}

const McpRevision* mcp_revision(std::string_view version) {
  for (const auto& revision : mcp_revisions())
    if (revision.version == version) return &revision;
  return nullptr;
}

const McpRevision& negotiate_mcp_revision(const json& requested) {
  const McpRevision* newest = nullptr;
  for (const auto& revision : mcp_revisions()) {
    if (!revision.handshake) continue;
    if (!newest) newest = &revision;
    if (requested.is_string() && revision.version == requested.get_ref<const std::string&>())
      return revision;
  }
  return *newest;
}

std::vector<std::string> mcp_versions() {
  std::vector<std::string> versions;
  for (const auto& revision : mcp_revisions()) versions.emplace_back(revision.version);
  return versions;
}

std::optional<NamedRevision> revision_named_in(const json& params) {
  if (!params.is_object()) return std::nullopt;
  auto meta = params.find("_meta");
  if (meta == params.end() || !meta->is_object()) return std::nullopt;
  auto named = meta->find(kMcpVersionKey);
  if (named == meta->end()) return std::nullopt;
  NamedRevision out;
  if (named->is_string()) {
    out.revision = mcp_revision(named->get_ref<const std::string&>());
    if (!out.revision) out.unsupported = named->get<std::string>();
  } else {
    out.unsupported = dump_json(*named);
  }
  // Quoted back in the answer: a version is a short name, and 64 MiB of one is not echoed.
  constexpr size_t kShown = 64;
  if (out.unsupported.size() > kShown) out.unsupported = out.unsupported.substr(0, kShown) + "...";
  return out;
}

json unsupported_revision_error(const json& id, const std::string& unsupported) {
  return json_rpc_error(id, JsonRpcError::unsupported_protocol_version,
                        "unsupported protocol version: " + unsupported,
                        {{"supported", mcp_versions()}, {"requested", unsupported}});
}

}  // namespace belljar
