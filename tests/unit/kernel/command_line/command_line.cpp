// The command line: belljar kernel | install | run | mcp | check, and its one-line usage errors.
#include "kernel/command_line/command_line.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sandbox/policy/policy_flags.hpp"
#include "usage_error.hpp"

using namespace belljar;
namespace fs = std::filesystem;

namespace {

std::string usage_error(const std::vector<std::string>& args) {
  return belljar::testing::usage_error([&] { parse_command_line(args); });
}

}  // namespace

TEST_CASE("help and version are recognised", "[command_line]") {
  for (const char* help : {"--help", "-h", "help"})
    CHECK(parse_command_line({help}).command == "help");
  for (const char* version : {"--version", "-V"})
    CHECK(parse_command_line({version}).command == "version");
  CHECK(parse_command_line({"kernel", "--help"}).command == "help");
  CHECK(parse_command_line({"run", "-h"}).command == "help");
}

TEST_CASE("usage text names every command and policy flag", "[command_line]") {
  std::string text = usage_text();
  for (const char* word : {"belljar kernel", "belljar install", "belljar run", "belljar mcp",
                           "belljar check", "--policy FILE", "--allow-net", "--isolation"})
    CHECK_THAT(text, Catch::Contains(word));
}

TEST_CASE("usage text lists every policy flag of the table with its default", "[command_line]") {
  std::string text = usage_text();
  for (const auto& flag : policy_flags()) {
    INFO(flag.name);
    CHECK_THAT(text, Catch::Contains("  " + flag.usage() + " ") &&
                         Catch::Contains(std::string(flag.meaning) + " [" +
                                         std::string(flag.fallback) + "]\n"));
  }
}

TEST_CASE("the policy flags install bakes into kernel.json parse back as a kernel command line",
          "[command_line]") {
  auto install = parse_command_line(
      {"install", "--user", "--audit-code", "--timeout", "2M", "--workspace-quota=0"});
  Policy policy = install.policy.build();
  std::vector<std::string> argv = {"kernel", "-f", "k.json"};
  for (auto& arg : install.policy.kernel_argv(policy)) argv.push_back(arg);
  auto kernel = parse_command_line(argv);
  Policy launched = kernel.policy.build();
  CHECK(launched.audit_code);
  CHECK(launched.timeout_seconds == Approx(120));
  CHECK(launched.workspace_quota_bytes == 0);
  CHECK(launched.python == policy.python);
}

TEST_CASE("help --flags-markdown is the README's table, and only that spelling", "[command_line]") {
  CHECK(parse_command_line({"help", "--flags-markdown"}).command == "flags-markdown");
  CHECK(parse_command_line({"help", "--flags-markdown", "x"}).command == "help");
  CHECK(parse_command_line({"--help", "--flags-markdown"}).command == "help");
  CHECK_THAT(usage_error({"run", "--flags-markdown"}), Catch::Contains("unknown option"));
}

TEST_CASE("missing or unknown command is a usage error", "[command_line]") {
  CHECK_THAT(usage_error({}), Catch::Contains("missing command"));
  CHECK_THAT(usage_error({"frobnicate"}), Catch::Contains("unknown command frobnicate"));
  CHECK_THAT(usage_error({"--bogus"}), Catch::Contains("--bogus"));
  CHECK_THAT(usage_error({"Kernel", "-f", "x"}), Catch::Contains("unknown command Kernel"));
}

TEST_CASE("unknown flag is a usage error naming it and the command", "[command_line]") {
  CHECK_THAT(usage_error({"kernel", "-f", "c.json", "--bogus"}),
             Catch::Contains("unknown option --bogus for belljar kernel"));
  CHECK_THAT(usage_error({"check", "--bogus=1"}), Catch::Contains("--bogus=1"));
  CHECK_THAT(usage_error({"mcp", "extra"}), Catch::Contains("unknown option extra"));
}

TEST_CASE("ipykernel's in-memory history option, which nbclient adds, is accepted by kernel",
          "[command_line]") {
  // jupyter_client takes any kernelspec named python3 for ipykernel: belljar installed under
  // that name must still start.
  CHECK(parse_command_line({"kernel", "-f", "c.json", "--HistoryManager.hist_file=:memory:"})
            .connection_file == "c.json");
  CHECK_THAT(usage_error({"run", "--HistoryManager.hist_file=:memory:", "-c", "1"}),
             Catch::Contains("unknown option"));
  CHECK_THAT(usage_error({"kernel", "-f", "c.json", "--HistoryManager.enabled=False"}),
             Catch::Contains("unknown option"));
}

TEST_CASE("a command's own flags are refused on other commands", "[command_line]") {
  CHECK_FALSE(usage_error({"run", "--user", "-c", "1"}).empty());
  CHECK_FALSE(usage_error({"kernel", "-f", "c.json", "--name", "x"}).empty());
  CHECK_FALSE(usage_error({"install", "-f", "c.json"}).empty());
  CHECK_FALSE(usage_error({"check", "-c", "1"}).empty());
}

TEST_CASE("kernel takes the connection file", "[command_line]") {
  CHECK(parse_command_line({"kernel", "-f", "/run/k.json"}).connection_file == "/run/k.json");
  CHECK(parse_command_line({"kernel", "--connection-file", "/run/k.json"}).connection_file ==
        "/run/k.json");
  CHECK(parse_command_line({"kernel", "--connection-file=/run/k.json"}).connection_file ==
        "/run/k.json");
}

TEST_CASE("kernel without -f is a usage error", "[command_line]") {
  CHECK_THAT(usage_error({"kernel"}), Catch::Contains("needs -f CONNECTION_FILE"));
  CHECK_THAT(usage_error({"kernel", "--timeout", "30"}), Catch::Contains("needs -f"));
  CHECK_THAT(usage_error({"kernel", "-f"}), Catch::Contains("-f: missing value"));
}

TEST_CASE("kernel passes policy flags on to the policy", "[command_line]") {
  auto cl =
      parse_command_line({"kernel", "--memory", "512M", "-f", "k.json", "--allow-net=pypi.org"});
  CHECK(cl.connection_file == "k.json");
  CHECK(cl.policy.given() ==
        std::vector<std::string>{"--memory", "512M", "--allow-net", "pypi.org"});
}

TEST_CASE("policy flag errors surface through the command line", "[command_line]") {
  CHECK_THAT(usage_error({"kernel", "-f", "k.json", "--memory", "12Q"}),
             Catch::StartsWith("--memory 12Q:"));
  CHECK_THAT(usage_error({"check", "--timeout"}), Catch::Contains("--timeout: missing value"));
}

TEST_CASE("install options", "[command_line]") {
  auto plain = parse_command_line({"install"});
  CHECK(plain.scope == CommandLine::Scope::default_);
  CHECK(plain.name == "belljar");
  CHECK(plain.display_name == "Python 3 (belljar)");

  CHECK(parse_command_line({"install", "--user"}).scope == CommandLine::Scope::user);
  CHECK(parse_command_line({"install", "--sys-prefix"}).scope == CommandLine::Scope::sys_prefix);
  auto prefixed = parse_command_line({"install", "--prefix", "/opt/env"});
  CHECK(prefixed.scope == CommandLine::Scope::prefix);
  CHECK(prefixed.prefix == "/opt/env");

  auto named = parse_command_line({"install", "--user", "--name", "belljar-net_1.0",
                                   "--display-name", "Sandboxed (net)", "--timeout", "2m"});
  CHECK(named.name == "belljar-net_1.0");
  CHECK(named.display_name == "Sandboxed (net)");
  CHECK(named.policy.given() == std::vector<std::string>{"--timeout", "2m"});
}

TEST_CASE("install refuses a kernelspec name that is not a plain word", "[command_line]") {
  for (const char* bad : {"", "a b", "../evil", "x/y", "ü"}) {
    INFO(bad);
    CHECK_THAT(usage_error({"install", "--name", bad}), Catch::Contains("--name"));
  }
  CHECK_THAT(usage_error({"install", "--prefix"}), Catch::Contains("--prefix: missing value"));
}

TEST_CASE("run takes -c CODE, FILE or - for standard input", "[command_line]") {
  auto code = parse_command_line({"run", "-c", "print(1)"});
  CHECK(code.run_code == std::string("print(1)"));
  CHECK_FALSE(code.run_file);

  auto file = parse_command_line({"run", "--json", "script.py", "--timeout", "5"});
  CHECK(file.run_file == std::string("script.py"));
  CHECK(file.json_output);
  CHECK_FALSE(file.run_code);

  auto stdin_run = parse_command_line({"run", "-"});
  CHECK(stdin_run.run_file == std::string("-"));
}

TEST_CASE("run needs something to run, once", "[command_line]") {
  CHECK_THAT(usage_error({"run"}), Catch::Contains("belljar run needs"));
  CHECK_THAT(usage_error({"run", "--json"}), Catch::Contains("belljar run needs"));
  CHECK_THAT(usage_error({"run", "-c"}), Catch::Contains("-c: missing value"));
  CHECK_FALSE(usage_error({"run", "a.py", "b.py"}).empty());
  CHECK_FALSE(usage_error({"run", "-c", "1", "a.py"}).empty());
}

TEST_CASE("run with both FILE and -c is refused in either order", "[command_line]") {
  CHECK_FALSE(usage_error({"run", "a.py", "-c", "1"}).empty());
  CHECK_FALSE(usage_error({"run", "-c", "1", "-c", "2"}).empty());
}

TEST_CASE("usage errors are one line", "[command_line]") {
  for (auto args : std::vector<std::vector<std::string>>{{},
                                                         {"--bogus"},
                                                         {"kernel"},
                                                         {"run"},
                                                         {"install", "--name", "a b"},
                                                         {"check", "--memory", "x"}})
    CHECK(usage_error(args).find('\n') == std::string::npos);
}

namespace {

// The belljar binary of this build: $BELLJAR, else next to the tests' directory.
std::string belljar_binary() {
  if (const char* env = std::getenv("BELLJAR"); env && ::access(env, X_OK) == 0) return env;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  // unit_tests is built in <build>/tests, belljar in <build>.
  for (fs::path dir : {self.parent_path(), self.parent_path().parent_path()})
    if (::access((dir / "belljar").c_str(), X_OK) == 0 && fs::is_regular_file(dir / "belljar"))
      return (dir / "belljar").string();
  return "";
}

struct Outcome {
  int status = -1;
  std::string stderr_text;
};

Outcome run_binary(const std::string& binary, const std::string& args) {
  char err_path[] = "/tmp/belljar-stderr-XXXXXX";
  int fd = ::mkstemp(err_path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::string command = "'" + binary + "' " + args + " </dev/null >/dev/null 2>" + err_path;
  int raw = std::system(command.c_str());
  std::ifstream in(err_path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(err_path);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text.str()};
}

}  // namespace

TEST_CASE("the belljar binary exits 2 with one line on stderr for bad usage",
          "[command_line][binary]") {
  std::string binary = belljar_binary();
  // The build makes belljar before unit_tests (tests/CMakeLists.txt): missing is a failure.
  if (binary.empty()) FAIL("no belljar binary beside unit_tests nor in $BELLJAR");
  for (const char* args : {"--bogus", "kernel -f /nonexistent", "kernel", "frobnicate",
                           "run --memory 12Q -c 1", "kernel -f /nonexistent --allow-net host:0"}) {
    INFO("belljar " << args);
    auto outcome = run_binary(binary, args);
    CHECK(outcome.status == 2);
    CHECK_THAT(outcome.stderr_text, Catch::StartsWith("belljar: "));
    CHECK(std::count(outcome.stderr_text.begin(), outcome.stderr_text.end(), '\n') == 1);
    CHECK(outcome.stderr_text.back() == '\n');
  }
  auto help = run_binary(binary, "--help");
  CHECK(help.status == 0);
  CHECK(help.stderr_text.empty());
}

TEST_CASE("an --open-files below what a worker starts with is refused in one line, nothing started",
          "[command_line][binary]") {
  CHECK(usage_error({"kernel", "-f", "k.json", "--open-files", "15"}) ==
        "--open-files 15: expected a number of open files from 16 to 1048576");
  CHECK(parse_command_line({"kernel", "-f", "k.json", "--open-files", "16"}).policy.given() ==
        std::vector<std::string>{"--open-files", "16"});
  std::string binary = belljar_binary();
  if (binary.empty()) FAIL("no belljar binary beside unit_tests nor in $BELLJAR");
  for (const char* args :
       {"run --open-files 0 -c 1", "run --open-files 15 -c 1", "run --open-files lots -c 1"}) {
    INFO("belljar " << args);
    auto outcome = run_binary(binary, args);
    CHECK(outcome.status == 2);
    CHECK_THAT(outcome.stderr_text, Catch::StartsWith("belljar: --open-files "));
    CHECK_THAT(outcome.stderr_text, Catch::Contains("from 16 to 1048576"));
    CHECK(std::count(outcome.stderr_text.begin(), outcome.stderr_text.end(), '\n') == 1);
  }
}

TEST_CASE("mcp takes its own flags, each checked, and no other command does", "[command_line]") {
  CommandLine cl = parse_command_line({"mcp", "--http", "[::1]:8765", "--session-folders",
                                       "--max-sessions", "4", "--idle-timeout", "90"});
  CHECK(cl.http == "[::1]:8765");
  CHECK(cl.session_folders);
  CHECK(cl.max_sessions == 4);
  CHECK(cl.idle_timeout_seconds == 90);
  CHECK_THAT(usage_error({"mcp", "--http", "example.org:80"}), Catch::Contains("IP address"));
  CHECK(parse_command_line({"mcp", "--http", "127.0.0.1:1", "--http-host", "mcp.example.org"})
            .http_hosts == std::vector<std::string>{"mcp.example.org"});
  CHECK_THAT(usage_error({"mcp", "--http-host", "mcp.example.org"}), Catch::Contains("give both"));
  CHECK_THAT(usage_error({"mcp", "--http", "127.0.0.1:1", "--http-host", "https://x"}),
             Catch::Contains("as a Host header carries it"));
  CHECK_THAT(usage_error({"mcp", "--http"}), Catch::Contains("missing value"));
  CHECK_THAT(usage_error({"mcp", "--max-sessions", "0"}), Catch::Contains("1 to 1024"));
  CHECK_THAT(usage_error({"mcp", "--http", "127.0.0.1:1", "--one-session",
                          "0b9e6a1c-4c1d-4f6e-9a8b-2d3c4e5f6a7b"}),
             Catch::Contains("never --http"));
  CHECK_THAT(usage_error({"mcp", "--session-folders", "--one-session",
                          "0b9e6a1c-4c1d-4f6e-9a8b-2d3c4e5f6a7b"}),
             Catch::Contains("goes to the router"));
  for (const char* flag : {"--http", "--session-folders", "--max-sessions"}) {
    INFO(flag);
    CHECK_FALSE(usage_error({"run", flag, "1", "-c", "1"}).empty());
  }
}
