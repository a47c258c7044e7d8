// What the kernel tells its operator, made in one place: the metrics before the audit log (a
// --metrics refused at start leaves no audit file behind), neither where the sandbox can write.
#include "kernel/observability/observability.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "sandbox_harness.hpp"

using namespace belljar;
using belljar::testing::TempDir;
namespace fs = std::filesystem;

namespace {

Policy policy_in(const fs::path& workspace) {
  Policy policy;
  policy.workspace = workspace;
  policy.isolation = Isolation::strict;
  return policy;
}

}  // namespace

TEST_CASE("a --metrics the sandbox can write refuses the start before any audit file is made",
          "[observability]") {
  TempDir workspace("belljar-obs-ws"), host("belljar-obs-host");
  Policy policy = policy_in(workspace.path);
  policy.audit_log = (host / "audit.jsonl").string();
  policy.metrics_file = (workspace / "metrics.prom").string();
  CHECK_THROWS(Observability(policy, "k"));
  CHECK_FALSE(fs::exists(host / "audit.jsonl"));
  CHECK_FALSE(fs::exists(workspace / "metrics.prom"));
}

TEST_CASE("an --audit-log the sandbox can write refuses the start", "[observability]") {
  TempDir workspace("belljar-obs-ws");
  Policy policy = policy_in(workspace.path);
  policy.audit_log = (workspace / "audit.jsonl").string();
  CHECK_THROWS(Observability(policy, "k"));
  CHECK_FALSE(fs::exists(workspace / "audit.jsonl"));
}

TEST_CASE("asked for on the host, the audit log is that file and records into it",
          "[observability]") {
  TempDir workspace("belljar-obs-ws"), host("belljar-obs-host");
  Policy policy = policy_in(workspace.path);
  policy.audit_log = (host / "audit.jsonl").string();
  policy.metrics_file = (host / "metrics.prom").string();
  Observability obs(policy, "kernel-one");
  CHECK(obs.audit.fallback().empty());
  obs.audit.record("probe", {{"n", 1}});
  CHECK(fs::file_size(host / "audit.jsonl") > 0);
}
