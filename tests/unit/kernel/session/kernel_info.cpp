// The kernel's self-description alone, from a policy, a worker's life and a fake audit log: the
// reply's shape (protocol, implementation, language_info from the worker's life, the debugger,
// belljar.isolation, notes and audit_log), and the banner's lines: the sandbox and what it lacks,
// no sandbox, active output not isolated, where the audit records go and whether they fail.
#include "kernel/session/kernel_info.hpp"

#include <catch2/catch.hpp>

#include "kernel/output/active_output.hpp"
#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

namespace {

struct Rig {
  Policy policy;
  WorkerLife life;
  FakeAudit audit;
  std::string destination = "/var/lib/belljar/audit.jsonl";
  std::string fallback;
  bool debugger = false;
  Rig() {
    life.starting();
    life.started({});
    REQUIRE(life.hello({{"type", "hello"}, {"language_info", {{"version", "3.12.1"}}}}));
  }
  KernelFacts facts() const { return {policy, life, debugger, audit, destination, fallback}; }
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("kernel_info_reply has the protocol's shape and the worker's language_info",
          "[kernel_info]") {
  Rig rig;
  json reply = kernel_info(rig.facts());
  CHECK(reply["status"] == "ok");
  CHECK(reply["protocol_version"] == "5.3");
  CHECK(reply["implementation"] == "belljar");
  CHECK(reply["implementation_version"] == BELLJAR_VERSION);
  CHECK(reply["language_info"] == rig.life.language_info());
  CHECK(reply["language_info"]["version"] == "3.12.1");
  CHECK(reply["banner"] == banner(rig.facts()));
  CHECK(reply["debugger"] == false);
  CHECK_FALSE(reply.contains("supported_features"));
  CHECK(reply["belljar"]["isolation"] == "strict");
  CHECK(reply["belljar"]["notes"] == json::array());
  CHECK(reply["belljar"]["audit_log"] ==
        json{{"destination", "/var/lib/belljar/audit.jsonl"}, {"failures", 0}});
}

TEST_CASE("kernel_info_reply offers the debugger only when the worker's Python has one",
          "[kernel_info]") {
  Rig rig;
  rig.debugger = true;
  json reply = kernel_info(rig.facts());
  CHECK(reply["debugger"] == true);
  CHECK(reply["supported_features"] == json::array({"debugger"}));
}

TEST_CASE("what the sandbox lacks is in belljar.notes and in the banner", "[kernel_info]") {
  Rig rig;
  rig.policy.isolation = Isolation::degraded;
  rig.life.reset();
  rig.life.starting();
  rig.life.started({"no Landlock", "no seccomp user notification"});
  REQUIRE(rig.life.hello({{"type", "hello"}, {"language_info", {{"version", "3.11.2"}}}}));
  json reply = kernel_info(rig.facts());
  CHECK(reply["belljar"]["isolation"] == "degraded");
  CHECK(reply["belljar"]["notes"] == json::array({"no Landlock", "no seccomp user notification"}));
  CHECK(sandbox_banner(rig.policy, rig.life) ==
        "belljar " BELLJAR_VERSION
        " — Python 3.11.2 in a sandbox (isolation degraded); it lacks: no Landlock; no seccomp "
        "user notification");
}

TEST_CASE("the banner's sandbox line is the same with or without network hosts", "[kernel_info]") {
  Rig rig;
  std::string without = sandbox_banner(rig.policy, rig.life);
  CHECK(without == "belljar " BELLJAR_VERSION " — Python 3.12.1 in a sandbox (isolation strict)");
  HostRule host;
  host.host = "pypi.org";
  host.ports = {443};
  rig.policy.allow_net.push_back(host);
  CHECK(sandbox_banner(rig.policy, rig.life) == without);
}

TEST_CASE("no sandbox, and active output not isolated, are said as loudly", "[kernel_info]") {
  Rig rig;
  rig.policy.isolation = Isolation::none;
  CHECK(sandbox_banner(rig.policy, rig.life) ==
        "belljar " BELLJAR_VERSION
        " — Python 3.12.1 with NO SANDBOX (--isolation none): code runs with your privileges, "
        "environment and network.");
  rig.policy.active_output = ActiveOutput::allow;
  CHECK(contains(sandbox_banner(rig.policy, rig.life),
                 "network. ACTIVE OUTPUT IS NOT ISOLATED (--active-output allow)"));
  rig.policy.isolation = Isolation::strict;
  CHECK(contains(sandbox_banner(rig.policy, rig.life),
                 "(isolation strict); ACTIVE OUTPUT IS NOT ISOLATED (--active-output allow)"));
  rig.policy.active_output = ActiveOutput::strip;
  CHECK_FALSE(contains(sandbox_banner(rig.policy, rig.life), "ACTIVE OUTPUT"));
}

TEST_CASE("before any hello the banner says the Python version is unknown", "[kernel_info]") {
  Policy policy;
  WorkerLife life;
  CHECK(contains(sandbox_banner(policy, life), "— Python ? in a sandbox"));
}

TEST_CASE("the banner names where the audit records go, and says when they fail", "[kernel_info]") {
  Rig rig;
  CHECK(contains(banner(rig.facts()), "\nAudit log: /var/lib/belljar/audit.jsonl"));
  CHECK_FALSE(contains(banner(rig.facts()), "FAILING"));
  rig.destination = "stderr";
  rig.fallback = "the state directory is not writable";
  CHECK(contains(banner(rig.facts()), "\nAudit log: stderr (the state directory is not writable)"));
  CHECK(kernel_info(rig.facts())["belljar"]["audit_log"]["fallback"] ==
        "the state directory is not writable");

  rig.audit.failing = true;
  rig.audit.record("cell", {});
  std::string text = banner(rig.facts());
  CHECK(contains(text, " — AUDIT LOG FAILING: " + rig.audit.failure_text() +
                           "; cells still run (no --audit-required)."));
  json audit = kernel_info(rig.facts())["belljar"]["audit_log"];
  CHECK(audit["failures"] == 1);
  CHECK(audit["last_failure"] == rig.audit.last_failure());
  CHECK(audit["cells_refused"] == false);

  rig.policy.audit_required = true;
  CHECK(contains(banner(rig.facts()), "; cells are refused (--audit-required)."));
  CHECK(kernel_info(rig.facts())["belljar"]["audit_log"]["cells_refused"] == true);
}
