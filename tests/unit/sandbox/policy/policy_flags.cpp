// The one table of policy flags and what is derived from it: the command line, the --policy
// file, --help, kernel.json's argv and the README's flag table.
#include "sandbox/policy/policy_flags.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "sandbox/policy/policy_testing.hpp"
#include "usage_error.hpp"

using namespace belljar;
using belljar::testing::collect;
using belljar::testing::TempFile;
using belljar::testing::usage_error;

namespace {

// A good value for each flag; a flag added to the table without one here fails the tests.
const std::map<std::string, std::string>& good_values() {
  static const std::map<std::string, std::string> values = {
      {"--workspace", "/tmp"},
      {"--ro", "/usr"},
      {"--upstream-ca", "/etc/passwd"},
      {"--hide", "*.csv"},
      {"--protect", "Makefile"},
      {"--writable", ".git"},
      {"--allow-net", "pypi.org"},
      {"--allow-local-net", "db.lan:5432"},
      {"--pass-env", "HOME"},
      {"--set-env", "MODE=test"},
      {"--secret", "OPENAI_API_KEY@api.openai.com"},
      {"--secret-file", "API_TOKEN=/etc/hostname@*.example.com:8443"},
      {"--timeout", "2M"},
      {"--cpu", "1.5s"},
      {"--debug-pause", "10m"},
      {"--memory", "512MiB"},
      {"--pids", "64"},
      {"--open-files", "256"},
      {"--file-size", "1g"},
      {"--tmp-size", "64M"},
      {"--output-limit", "1M"},
      {"--workspace-quota", "0"},
      {"--python", "/usr/bin/python3"},
      {"--sandbox-user", "nobody"},
      {"--audit-log", "/tmp/belljar-audit.jsonl"},
      {"--audit-code", "true"},
      {"--audit-required", "true"},
      {"--metrics", "/tmp/belljar.prom"},
      {"--history-size", "50"},
      {"--checkpoints", "4"},
      {"--isolation", "degraded"},
      {"--active-output", "strip"},
      {"--bench-unbrokered-workspace", "true"}};
  return values;
}

// The README's policy flag table: from its header row to the first line that is not a row.
std::string readme_flag_table() {
  std::ifstream in(BELLJAR_README);
  REQUIRE(in);
  std::string line, table;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line == "| flag | default | meaning |") inside = true;
    if (inside && line.rfind("|", 0) != 0) break;
    if (inside) table += line + "\n";
  }
  return table;
}

}  // namespace

TEST_CASE("every table entry is well formed", "[policy][flags]") {
  for (const auto& flag : policy_flags()) {
    INFO(flag.name);
    CHECK(flag.name.rfind("--", 0) == 0);
    CHECK(find_policy_flag(flag.name) == &flag);
    CHECK_FALSE(flag.meaning.empty());
    CHECK_FALSE(flag.fallback.empty());
    CHECK((flag.kind == FlagValue::toggle) == flag.placeholder.empty());
    if (flag.kind == FlagValue::policy_file) {
      // A policy file cannot include another.
      CHECK(flag.file_key.empty());
      CHECK(flag.apply == nullptr);
    } else {
      // The README promises: the same names as the flags, without the dashes.
      CHECK(flag.file_key == flag.name.substr(2));
      CHECK(flag.apply != nullptr);
    }
  }
}

TEST_CASE("every flag is taken on the command line and in a policy file", "[policy][flags]") {
  for (const auto& flag : policy_flags()) {
    if (flag.kind == FlagValue::policy_file) continue;
    std::string name(flag.name);
    INFO(name);
    REQUIRE(good_values().count(name));
    const std::string& value = good_values().at(name);
    PolicyBuilder builder;
    std::vector<std::string> args = {name + "=" + value, "--python", "/usr/bin/python3"};
    CHECK(builder.take(args, 0) == 1);
    Policy from_flag = collect({name + "=" + value, "--python", "/usr/bin/python3"}).build();

    std::string key(flag.file_key);
    nlohmann::json setting =
        flag.repeatable ? nlohmann::json::array({value}) : nlohmann::json(value);
    TempFile file(nlohmann::json{{key, setting}}.dump());
    Policy from_file = collect({"--policy", file.path, "--python", "/usr/bin/python3"}).build();
    CHECK(from_file.summary() == from_flag.summary());
    CHECK(from_file.sandbox_user == from_flag.sandbox_user);
    CHECK(from_file.audit_log == from_flag.audit_log);
    CHECK(from_file.audit_code == from_flag.audit_code);
    CHECK(from_file.audit_required == from_flag.audit_required);
    CHECK(from_file.metrics_file == from_flag.metrics_file);
  }
  CHECK(good_values().size() + 1 == policy_flags().size());
}

TEST_CASE("the defaults the table shows are the Policy's own", "[policy][flags]") {
  Policy defaults;
  for (const auto& flag : policy_flags()) {
    bool shown_as_value = flag.kind == FlagValue::size || flag.kind == FlagValue::duration ||
                          flag.kind == FlagValue::count || flag.kind == FlagValue::choice;
    if (!shown_as_value || flag.name == "--cpu") continue;  // --cpu: "the timeout"
    INFO(flag.name << " [" << flag.fallback << "]");
    Policy applied;
    flag.apply(applied, std::string(flag.name), std::string(flag.fallback));
    CHECK(applied.summary() == defaults.summary());
  }
  CHECK_FALSE(defaults.cpu_seconds);
  CHECK(find_policy_flag("--cpu")->fallback == "the timeout");
  CHECK(find_policy_flag("--audit-code")->fallback == "off");
  CHECK(find_policy_flag("--audit-required")->fallback == "off");
  CHECK_FALSE(defaults.audit_required);
  CHECK_FALSE(defaults.audit_code);
}

TEST_CASE("flag --workspace-quota 0 means no limit, as its help says", "[policy][flags]") {
  // Before: parse_size refused 0, so the documented "0: no limit" could not be asked for.
  Policy policy = collect({"--workspace-quota", "0", "--python", "/usr/bin/python3"}).build();
  CHECK(policy.workspace_quota_bytes == 0);
  CHECK_THAT(usage_error([] {
               collect({"--workspace-quota", "-1"});
             }),
             Catch::StartsWith("--workspace-quota -1:"));
}

TEST_CASE("flag --history-size takes a count of cells, 0 included", "[policy][flags]") {
  CHECK(collect({"--history-size", "0", "--python", "/usr/bin/python3"}).build().history_size == 0);
  CHECK(collect({"--history-size=1000000", "--python", "/usr/bin/python3"}).build().history_size ==
        1000000);
  for (const char* bad : {"-1", "1000001", "10k", "", "1.5"})
    CHECK_THAT(usage_error([&] {
                 collect({"--history-size", bad});
               }),
               Catch::StartsWith(std::string("--history-size ") + bad +
                                 ": expected a number of "
                                 "cells from 0 to 1000000"));
}

TEST_CASE("a single-valued setting in a policy file takes one value, not a list",
          "[policy][flags][file]") {
  TempFile file(R"({"timeout": [10, 20]})");
  CHECK_THAT(usage_error([&] {
               collect({"--policy", file.path}).build();
             }),
             Catch::Contains("\"timeout\" takes one value"));
  TempFile listed(R"({"allow_net": ["pypi.org"], "audit_code": true, "memory": 536870912})");
  Policy policy = collect({"--policy", listed.path, "--python", "/usr/bin/python3"}).build();
  CHECK(policy.allow_net.at(0).host == "pypi.org");
  CHECK(policy.audit_code);
  CHECK(policy.memory_bytes == 512ull << 20);
}

TEST_CASE("kernel.json's argv: the flags as given, the python resolved, toggles joined",
          "[policy][flags][kernelspec]") {
  auto builder = collect({"--memory", "512M", "--audit-code", "--timeout=2m"});
  Policy policy = builder.build();
  auto argv = builder.kernel_argv(policy);
  REQUIRE(argv.size() == 7);
  CHECK(std::vector<std::string>(argv.begin(), argv.begin() + 5) ==
        std::vector<std::string>{"--memory", "512M", "--audit-code=true", "--timeout", "2m"});
  CHECK(argv[5] == "--python");
  CHECK(argv[6] == policy.python);
  // What is baked reads back to the same policy (before: "--audit-code true" left a stray
  // "true" that the kernel refused as an unknown option).
  Policy again = collect(argv).build();
  CHECK(again.summary() == policy.summary());
  CHECK(again.audit_code);

  auto with_python = collect({"--python", "/usr/bin/python3"});
  CHECK(with_python.kernel_argv(with_python.build()) ==
        std::vector<std::string>{"--python", "/usr/bin/python3"});
}

// `belljar install --workspace .` means the directory install ran in, not whatever directory
// Jupyter later starts the kernel in (it used to be baked as ".").
TEST_CASE("kernel.json's argv: relative paths are baked as install saw them",
          "[policy][flags][kernelspec]") {
  const std::string here = std::filesystem::current_path().string();
  auto builder = collect({"--workspace", ".", "--ro", "./", "--audit-log", "audit.log", "--metrics",
                          "sub/../m.prom", "--python", "/usr/bin/python3"});
  auto argv = builder.kernel_argv(builder.build());
  CHECK(argv == std::vector<std::string>{"--workspace", here, "--ro", here, "--audit-log",
                                         here + "/audit.log", "--metrics", here + "/m.prom",
                                         "--python", "/usr/bin/python3"});
}

// `-` is stderr wherever Jupyter starts the kernel, never a file named "-" where install ran.
TEST_CASE("a dash for the audit log means stderr: on the command line, in kernel.json, in a file",
          "[policy][flags][kernelspec]") {
  auto builder = collect({"--audit-log", "-", "--python", "/usr/bin/python3"});
  CHECK(builder.build().audit_log == kAuditLogStderr);
  CHECK(builder.kernel_argv(builder.build()) ==
        std::vector<std::string>{"--audit-log", "-", "--python", "/usr/bin/python3"});
  TempFile file(R"({"audit-log": "-"})");
  CHECK(collect({"--policy", file.path, "--python", "/usr/bin/python3"}).build().audit_log ==
        kAuditLogStderr);
  CHECK(collect({"--python", "/usr/bin/python3"}).build().audit_log.empty());  // the default
}

TEST_CASE("the help lists every flag with its default", "[policy][flags]") {
  auto& help = policy_flag_help();
  REQUIRE(help.size() == policy_flags().size());
  for (size_t i = 0; i < help.size(); ++i) {
    const auto& flag = policy_flags()[i];
    CHECK(help[i].first == flag.usage());
    CHECK_THAT(help[i].second, Catch::StartsWith(std::string(flag.meaning)) &&
                                   Catch::EndsWith("[" + std::string(flag.fallback) + "]"));
  }
}

TEST_CASE("the README's policy flag table is the code's", "[policy][flags][readme]") {
  std::string readme = readme_flag_table();
  std::string code = policy_flags_markdown();
  INFO(
      "README.md's policy flag table differs from the code's; `belljar help --flags-markdown` "
      "prints the table to paste");
  CHECK(readme == code);
  // And so every flag is in the README, and the README names no flag the code lacks.
  for (const auto& flag : policy_flags())
    CHECK_THAT(readme, Catch::Contains("| `" + flag.usage() + "` |"));
  std::istringstream rows(readme);
  std::string row;
  int flag_rows = 0;
  while (std::getline(rows, row))
    if (row.rfind("| `--", 0) == 0) ++flag_rows;
  CHECK(flag_rows == static_cast<int>(policy_flags().size()));
}

TEST_CASE(
    "flag --secret binds a name to a host, implies the host, and keeps its value out of reach",
    "[policy][flags][secret]") {
  Policy policy = collect({"--secret", "OPENAI_API_KEY@api.openai.com", "--secret",
                           "OPENAI_API_KEY@[::1]:8443", "--secret-file",
                           "TOKEN=relative/token@*.example.com", "--python", "/usr/bin/python3"})
                      .build();
  REQUIRE(policy.secrets.size() == 3);
  CHECK(policy.secrets[0].name == "OPENAI_API_KEY");
  CHECK(policy.secrets[0].host.host == "api.openai.com");
  CHECK(policy.secrets[0].host.ports == std::vector<uint16_t>{443});  // 443, never 80
  CHECK(policy.secrets[1].text() == "OPENAI_API_KEY@[::1]:8443");
  CHECK(policy.secrets[2].file ==
        (std::filesystem::current_path() / "relative/token").lexically_normal().string());
  // Each binding allows its host, and says so in the rule it adds.
  REQUIRE(policy.allow_net.size() == 3);
  CHECK(policy.allow_net[0].text() == "api.openai.com:443");
  CHECK(policy.allow_net[0].secret == "--secret OPENAI_API_KEY@api.openai.com:443");
  CHECK(policy.summary()["secrets"] ==
        nlohmann::json::array({"OPENAI_API_KEY@api.openai.com:443", "OPENAI_API_KEY@[::1]:8443",
                               "TOKEN=" + policy.secrets[2].file + "@*.example.com:443"}));

  for (const char* bad : {"NOHOST", "1BAD@api.example.com", "A-B@api.example.com", "K@",
                          "K@bad host", "K@api.example.com:0"})
    CHECK_THAT(usage_error([&] {
                 collect({"--secret", bad});
               }),
               Catch::StartsWith(std::string("--secret ") + bad));
  CHECK_THAT(usage_error([] {
               collect({"--secret-file", "K@api.example.com"});
             }),
             Catch::Contains("expected NAME=PATH@HOST[:PORT]"));
}

TEST_CASE("a bound name cannot also be passed, set or bound to a second value",
          "[policy][flags][secret]") {
  CHECK_THAT(usage_error([] {
               collect({"--secret", "KEY@api.example.com", "--pass-env", "KEY"}).build();
             }),
             Catch::Contains("--pass-env KEY would put the value itself in the sandbox"));
  CHECK_THAT(usage_error([] {
               collect({"--set-env", "KEY=x", "--secret", "KEY@api.example.com"}).build();
             }),
             Catch::Contains("--set-env KEY would replace its placeholder"));
  CHECK_THAT(
      usage_error([] {
        collect({"--secret", "KEY@a.example.com", "--secret-file", "KEY=/f@b.example.com"}).build();
      }),
      Catch::Contains("one name has one value"));
}

TEST_CASE("kernel.json's argv: a secret file's path is baked absolute, the value never",
          "[policy][flags][kernelspec][secret]") {
  const std::string here = std::filesystem::current_path().string();
  auto builder = collect({"--secret", "KEY@api.example.com", "--secret-file",
                          "TOKEN=./token@api.example.com", "--python", "/usr/bin/python3"});
  CHECK(builder.kernel_argv(builder.build()) ==
        std::vector<std::string>{"--secret", "KEY@api.example.com", "--secret-file",
                                 "TOKEN=" + here + "/token@api.example.com:443", "--python",
                                 "/usr/bin/python3"});
}
