// Where the audit log goes without --audit-log: the state directory the environment names, made
// 0700, a fresh 0600 file per kernel in it; and stderr, with the reason, wherever the sandbox
// could write there or there is no such directory.
#include "kernel/observability/audit_destination.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <string>

#include "kernel/observability/audit_log.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;
using belljar::testing::TempDir;
namespace fs = std::filesystem;

namespace {

Getenv environment(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char* name) -> const char* {
    auto found = values.find(name);
    return found == values.end() ? nullptr : found->second.c_str();
  };
}

Policy policy_for(const fs::path& workspace, Isolation isolation = Isolation::strict) {
  Policy policy;
  policy.workspace = workspace;
  policy.isolation = isolation;
  return policy;
}

unsigned mode_of(const fs::path& path) {
  struct stat info {};
  REQUIRE(::lstat(path.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

std::string read_all(const fs::path& path) {
  Fd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(file);
  return read_to_eof(file.get());
}

}  // namespace

TEST_CASE("the state directory is $XDG_STATE_HOME/belljar, else ~/.local/state/belljar",
          "[audit_destination]") {
  auto xdg = state_directory(environment({{"XDG_STATE_HOME", "/x/state/"}, {"HOME", "/h"}}));
  CHECK(xdg.unusable.empty());
  CHECK(xdg.existing == "/x");  // XDG_STATE_HOME itself is made if missing, its parent not
  CHECK(xdg.made == std::vector<std::string>{"state", "belljar"});
  CHECK(xdg.path() == "/x/state/belljar");
  CHECK(state_directory(environment({{"XDG_STATE_HOME", "/"}})).path() == "/belljar");

  // The XDG spec: a relative path is invalid and ignored. One with ".." is too.
  for (const char* ignored : {"", "state", "/x/../y"}) {
    INFO(ignored);
    auto home = state_directory(environment({{"XDG_STATE_HOME", ignored}, {"HOME", "/h/"}}));
    CHECK(home.existing == "/h/");  // the home is never made
    CHECK(home.made == std::vector<std::string>{".local", "state", "belljar"});
    CHECK(home.path() == "/h/.local/state/belljar");
  }

  CHECK(state_directory(environment({})).unusable == "HOME is not set");
  CHECK(state_directory(environment({{"HOME", ""}})).unusable == "HOME is not set");
  CHECK(state_directory(environment({{"HOME", "home"}})).unusable ==
        "HOME is not an absolute path: home");
}

TEST_CASE("each kernel gets a fresh file in a state directory made 0700", "[audit_destination]") {
  TempDir home("belljar-audit-home"), workspace("belljar-audit-ws");
  auto env = environment({{"HOME", home.path.string()}});
  Policy policy = policy_for(workspace.path);
  fs::path state = home / ".local/state/belljar";

  AuditDestination first = open_audit_destination(policy, "kernel-one", env);
  REQUIRE(first.file);
  CHECK(first.fallback.empty());
  fs::path log = first.name;
  CHECK(log.parent_path() == state);
  CHECK_THAT(log.filename().string(),
             Catch::Matches("audit-[0-9]{8}T[0-9]{6}Z-kernel-one\\.jsonl"));
  CHECK(mode_of(log) == 0600);
  for (const fs::path& made : {home / ".local", home / ".local/state", state})
    CHECK(mode_of(made) == 0700);

  {
    AuditLog audit(std::move(first));
    audit.set_kernel("kernel-one");
    CHECK(audit.destination() == log.string());
    CHECK(audit.record("cell", {{"status", "ok"}}));
  }
  auto text = read_all(log);
  CHECK(text.find("\"event\":\"cell\"") != std::string::npos);
  CHECK(text.find("\"kernel\":\"kernel-one\"") != std::string::npos);

  AuditDestination second = open_audit_destination(policy, "kernel-two", env);
  REQUIRE(second.file);
  CHECK(second.name != log.string());
  CHECK(fs::path(second.name).parent_path() == state);
}

TEST_CASE("a state directory the sandbox could write is not used", "[audit_destination]") {
  TempDir home("belljar-audit-home"), elsewhere("belljar-audit-ws");
  auto env = environment({{"HOME", home.path.string()}});
  const std::string state = (home / ".local/state/belljar").string();

  SECTION("in the workspace: nothing is made there") {
    AuditDestination in_workspace = open_audit_destination(policy_for(home.path), "k", env);
    CHECK_FALSE(in_workspace.file);
    CHECK(in_workspace.name == "stderr");
    CHECK(in_workspace.fallback == state + " is in the workspace, which the sandbox can write");
    CHECK_FALSE(fs::exists(home / ".local"));
    // With no sandbox there is nothing to keep out.
    CHECK(open_audit_destination(policy_for(home.path, Isolation::none), "k", env).file);
  }
  SECTION("led into the workspace by a symlink") {
    fs::create_directories(home / ".local/state");
    fs::create_directory(elsewhere / "logs");
    fs::create_directory_symlink(elsewhere / "logs", home / ".local/state/belljar");
    AuditDestination led = open_audit_destination(policy_for(elsewhere.path), "k", env);
    CHECK_FALSE(led.file);
    CHECK(led.fallback == state + " leads to " + (elsewhere / "logs").string() +
                              " in the workspace, which the sandbox can write");
    CHECK(fs::is_empty(elsewhere / "logs"));
  }
  SECTION("writable by others") {
    fs::create_directories(state);
    ::chmod(state.c_str(), 0777);
    AuditDestination shared = open_audit_destination(policy_for(elsewhere.path), "k", env);
    CHECK_FALSE(shared.file);
    CHECK(shared.fallback == state + " is writable by its group or by others: chmod go-w");
    CHECK(fs::is_empty(state));
  }
  SECTION("another user's") {
    if (::geteuid() != 0) return;  // only root can give a folder away; the mode case stands
    fs::create_directories(state);
    REQUIRE(::chown(state.c_str(), 65534, 65534) == 0);
    AuditDestination theirs = open_audit_destination(policy_for(elsewhere.path), "k", env);
    CHECK_FALSE(theirs.file);
    CHECK(theirs.fallback == state + " belongs to uid 65534, not to 0");
  }
  SECTION("under /tmp in degraded mode, which has no /tmp of its own") {
    // Judged before anything is made: the path need not exist.
    const std::string under_tmp = "/tmp/belljar-audit-" + std::to_string(::getpid()) + "/state";
    AuditDestination shared =
        open_audit_destination(policy_for(elsewhere.path, Isolation::degraded), "k",
                               environment({{"XDG_STATE_HOME", under_tmp}}));
    CHECK_FALSE(shared.file);
    CHECK(shared.fallback == under_tmp + "/belljar is in /tmp, which the sandbox can write");
    CHECK_FALSE(fs::exists(under_tmp));
  }
}

TEST_CASE("without a usable home the records go to stderr, saying why", "[audit_destination]") {
  TempDir scratch("belljar-audit-home"), workspace("belljar-audit-ws");
  Policy policy = policy_for(workspace.path);
  const std::string missing = (scratch / "missing").string();
  AuditDestination none = open_audit_destination(policy, "k", environment({{"HOME", missing}}));
  CHECK_FALSE(none.file);
  CHECK(none.fallback == "open(" + missing + "): No such file or directory");
  CHECK_FALSE(fs::exists(missing));  // a home is never made
  CHECK(open_audit_destination(policy, "k", environment({})).fallback == "HOME is not set");
  CHECK(fallback_warning("HOME is not set") ==
        "warning: the audit log goes to stderr, not to the state directory: HOME is not set. "
        "--audit-log FILE (outside the workspace) names a file; --audit-log - keeps stderr "
        "without this warning");
}

TEST_CASE("a dash is stderr, a named file is opened as named", "[audit_destination]") {
  TempDir home("belljar-audit-home"), workspace("belljar-audit-ws");
  auto env = environment({{"HOME", home.path.string()}});
  Policy policy = policy_for(workspace.path);
  policy.audit_log = std::string(kAuditLogStderr);
  AuditDestination dash = open_audit_destination(policy, "k", env);
  CHECK_FALSE(dash.file);
  CHECK(dash.name == "stderr");
  CHECK(dash.fallback.empty());
  CHECK(describe_audit_destination(policy, env) == "stderr (--audit-log -)");

  policy.audit_log = (home / "named.jsonl").string();
  AuditDestination named = open_audit_destination(policy, "k", env);
  CHECK(named.file);
  CHECK(named.name == policy.audit_log);
  CHECK(describe_audit_destination(policy, env) == policy.audit_log);
  CHECK_FALSE(fs::exists(home / ".local"));  // the state directory is only for the default

  policy.audit_log = (workspace / "named.jsonl").string();
  CHECK_THROWS_AS(open_audit_destination(policy, "k", env), UsageError);
}

TEST_CASE("check describes the default without making a log file", "[audit_destination]") {
  TempDir home("belljar-audit-home"), workspace("belljar-audit-ws");
  auto env = environment({{"HOME", home.path.string()}});
  const std::string state = (home / ".local/state/belljar").string();
  CHECK(describe_audit_destination(policy_for(workspace.path), env) ==
        state +
            "/audit-<start>-<kernel>.jsonl, a file per kernel (belljar launch: stderr; belljar "
            "run: none)");
  CHECK(fs::is_empty(state));
  CHECK(describe_audit_destination(policy_for(home.path), env) ==
        "stderr, not the state directory: " + state +
            " is in the workspace, which the sandbox can write");
}
