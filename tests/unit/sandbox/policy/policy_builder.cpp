// PolicyBuilder: policy flags and --policy FILE, later sources winning.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sandbox/policy/policy.hpp"
#include "sandbox/policy/policy_testing.hpp"
#include "usage_error.hpp"

using namespace belljar;
using belljar::testing::collect;
using belljar::testing::TempFile;
using belljar::testing::usage_error;
namespace fs = std::filesystem;

namespace {

// Builds with an explicit interpreter so the result does not depend on PATH.
Policy build(std::vector<std::string> args) {
  args.insert(args.begin(), {"--python", "/usr/bin/python3"});
  return collect(args).build();
}

std::string flag_error(const std::vector<std::string>& args) {
  return usage_error([&] { collect(args); });
}

}  // namespace

TEST_CASE("defaults when no policy flag is given", "[policy][builder]") {
  Policy policy = build({});
  CHECK(policy.workspace == fs::current_path());
  CHECK(policy.read_only.empty());
  CHECK(policy.allow_net.empty());
  CHECK(policy.pass_env.empty());
  CHECK(policy.timeout_seconds == Approx(60));
  CHECK_FALSE(policy.cpu_seconds);
  CHECK(policy.debug_pause_seconds == Approx(3600));
  CHECK(policy.memory_bytes == 1ull << 30);
  CHECK(policy.pids == 256);
  CHECK(policy.output_limit_bytes == 10ull << 20);
  CHECK(policy.isolation == Isolation::strict);
}

TEST_CASE("take reports how many arguments a policy flag used", "[policy][builder]") {
  PolicyBuilder builder;
  std::vector<std::string> args = {"--memory", "512M", "--timeout=30", "-f", "x", "--user"};
  CHECK(builder.take(args, 0) == 2);
  CHECK(builder.take(args, 2) == 1);
  CHECK(builder.take(args, 3) == 0);
  CHECK(builder.take(args, 5) == 0);
  CHECK(builder.given() == std::vector<std::string>{"--memory", "512M", "--timeout", "30"});
}

TEST_CASE("every policy flag is parsed into the policy", "[policy][builder]") {
  Policy policy = build({"--workspace",    "/tmp",
                         "--ro",           "/usr/share",
                         "--ro",           "/etc/hostname",
                         "--hide",         "*.csv",
                         "--allow-net",    "pypi.org",
                         "--allow-net",    "*.example.com:8443",
                         "--pass-env",     "HOME",
                         "--set-env",      "MODE=test",
                         "--timeout",      "2m",
                         "--cpu",          "1.5s",
                         "--memory",       "512M",
                         "--pids",         "64",
                         "--file-size",    "1G",
                         "--tmp-size",     "64M",
                         "--output-limit", "1M",
                         "--sandbox-user", "nobody",
                         "--audit-log",    "audit.jsonl",
                         "--isolation",    "degraded"});
  CHECK(policy.workspace == fs::path("/tmp"));
  CHECK(policy.read_only == std::vector<fs::path>{"/usr/share", "/etc/hostname"});
  CHECK(policy.hide == std::vector<std::string>{"*.csv"});
  REQUIRE(policy.allow_net.size() == 2);
  CHECK(policy.allow_net[0].host == "pypi.org");
  CHECK(policy.allow_net[1].ports == std::vector<uint16_t>{8443});
  CHECK(policy.pass_env == std::vector<std::string>{"HOME"});
  CHECK(policy.set_env == std::vector<std::pair<std::string, std::string>>{{"MODE", "test"}});
  CHECK(policy.timeout_seconds == Approx(120));
  REQUIRE(policy.cpu_seconds);
  CHECK(*policy.cpu_seconds == Approx(1.5));
  CHECK(policy.memory_bytes == 512ull << 20);
  CHECK(policy.pids == 64);
  CHECK(policy.file_size_bytes == 1ull << 30);
  CHECK(policy.tmp_size_bytes == 64ull << 20);
  CHECK(policy.output_limit_bytes == 1ull << 20);
  CHECK(policy.python == "/usr/bin/python3");
  CHECK(policy.sandbox_user == "nobody");
  CHECK(policy.audit_log == (fs::current_path() / "audit.jsonl").string());
  CHECK(policy.isolation == Isolation::degraded);
}

TEST_CASE("policy flags take --flag=value too", "[policy][builder]") {
  Policy policy = build({"--memory=256M", "--allow-net=example.com:8080", "--set-env=A=b=c"});
  CHECK(policy.memory_bytes == 256ull << 20);
  CHECK(policy.allow_net.at(0).ports == std::vector<uint16_t>{8080});
  CHECK(policy.set_env.at(0) == std::pair<std::string, std::string>{"A", "b=c"});
}

TEST_CASE("a repeated single-valued flag: the last one wins", "[policy][builder]") {
  Policy policy = build({"--timeout", "10", "--timeout", "20"});
  CHECK(policy.timeout_seconds == Approx(20));
}

TEST_CASE("the debugger's pause allowance takes a duration", "[policy][builder]") {
  CHECK(build({"--debug-pause", "10m"}).debug_pause_seconds == Approx(600));
  CHECK(build({"--debug-pause=90"}).debug_pause_seconds == Approx(90));
  CHECK_THAT(flag_error({"--debug-pause", "ever"}), Catch::StartsWith("--debug-pause ever:"));
}

TEST_CASE("policy flag without its value is refused", "[policy][builder]") {
  CHECK_THAT(flag_error({"--memory"}), Catch::Contains("--memory: missing value"));
}

TEST_CASE("bad policy flag values are refused where they were typed", "[policy][builder]") {
  CHECK_THAT(flag_error({"--memory", "12Q"}), Catch::StartsWith("--memory 12Q:"));
  CHECK_THAT(flag_error({"--memory", "-1"}), Catch::StartsWith("--memory -1:"));
  CHECK_THAT(flag_error({"--memory", "16M"}), Catch::Contains("below the 32M"));
  CHECK_THAT(flag_error({"--timeout", "forever"}), Catch::StartsWith("--timeout forever:"));
  CHECK_THAT(flag_error({"--cpu", "-3"}), Catch::StartsWith("--cpu -3:"));
  CHECK_THAT(flag_error({"--allow-net", "host:99999"}), Catch::Contains("port must be 1 to 65535"));
  CHECK_THAT(flag_error({"--isolation", "off"}), Catch::StartsWith("--isolation off:"));
  CHECK_THAT(flag_error({"--file-size", "big"}), Catch::StartsWith("--file-size big:"));
  CHECK_THAT(flag_error({"--tmp-size", "0"}), Catch::StartsWith("--tmp-size 0:"));
  CHECK_THAT(flag_error({"--output-limit", "1X"}), Catch::StartsWith("--output-limit 1X:"));
  CHECK_THAT(flag_error({"--hide", ""}), Catch::StartsWith("--hide"));
  CHECK_THAT(flag_error({"--audit-log", ""}), Catch::StartsWith("--audit-log"));
}

TEST_CASE("flag --pids accepts 8 to 1000000 processes", "[policy][builder]") {
  CHECK(build({"--pids", "8"}).pids == 8);
  CHECK(build({"--pids", "1000000"}).pids == 1000000);
  for (const char* bad : {"7", "1000001", "-5", "abc", "", "12k", "99999999999999999999999"}) {
    INFO(bad);
    CHECK_THAT(flag_error({"--pids", bad}), Catch::Contains("from 8 to 1000000"));
  }
}

TEST_CASE("flag --open-files accepts what a worker can start with, up to 1048576",
          "[policy][builder]") {
  CHECK(build({}).open_files == 4096);
  CHECK(build({"--open-files", "16"}).open_files == 16);
  CHECK(build({"--open-files=1048576"}).open_files == 1048576);
  for (const char* bad :
       {"15", "0", "1048577", "-64", "abc", "", "4k", "64 ", "99999999999999999999999"}) {
    INFO(bad);
    CHECK(flag_error({"--open-files", bad}) == "--open-files " + std::string(bad) +
                                                   ": expected a number of open files from 16 "
                                                   "to 1048576");
  }
}

TEST_CASE("flag --pass-env refuses what is not a variable name", "[policy][builder]") {
  CHECK(build({"--pass-env", "_PRIVATE_1"}).pass_env == std::vector<std::string>{"_PRIVATE_1"});
  for (const char* bad : {"", "1ABC", "A-B", "A=B", "A B", "PATH;rm", "Ä"}) {
    INFO(bad);
    CHECK_THAT(flag_error({"--pass-env", bad}), Catch::Contains("not a variable name"));
  }
}

TEST_CASE("flag --set-env takes NAME=VALUE", "[policy][builder]") {
  auto policy = build({"--set-env", "EMPTY=", "--set-env", "URL=http://x/?a=b"});
  using Env = std::vector<std::pair<std::string, std::string>>;
  CHECK(policy.set_env == Env{{"EMPTY", ""}, {"URL", "http://x/?a=b"}});
  for (const char* bad : {"NOEQUALS", "=value", "1A=x", "A-B=x", ""}) {
    INFO(bad);
    CHECK_THAT(flag_error({"--set-env", bad}), Catch::Contains("expected NAME=VALUE"));
  }
}

TEST_CASE("flag --workspace and --ro need existing paths", "[policy][builder]") {
  CHECK_THAT(flag_error({"--workspace", "/nonexistent/belljar"}),
             Catch::Contains("no such file or directory"));
  CHECK_THAT(flag_error({"--workspace", "/etc/hostname"}), Catch::Contains("not a directory"));
  CHECK_THAT(flag_error({"--workspace", ""}), Catch::Contains("empty path"));
  CHECK_THAT(flag_error({"--ro", "/nonexistent/belljar"}), Catch::Contains("no such file"));
}

TEST_CASE("flag --workspace is made absolute and canonical", "[policy][builder]") {
  auto policy = build({"--workspace", "/tmp/../tmp/."});
  CHECK(policy.workspace == fs::path("/tmp"));
}

TEST_CASE("flag --isolation takes strict, degraded or none", "[policy][builder]") {
  CHECK(build({"--isolation", "strict"}).isolation == Isolation::strict);
  CHECK(build({"--isolation", "degraded"}).isolation == Isolation::degraded);
  CHECK(build({"--isolation", "none"}).isolation == Isolation::none);
}

TEST_CASE("flag --sandbox-user never names root", "[policy][builder]") {
  CHECK_THAT(flag_error({"--sandbox-user", "root"}), Catch::Contains("never runs as root"));
  CHECK_FALSE(flag_error({"--sandbox-user", "0"}).empty());
  CHECK_FALSE(flag_error({"--sandbox-user", "00"}).empty());
  CHECK_THAT(flag_error({"--sandbox-user", "no-such-user-xyz"}), Catch::Contains("no such user"));
  CHECK(build({"--sandbox-user", "65534"}).sandbox_user == "65534");
}

TEST_CASE("flag --sandbox-user refuses numeric ids that are not a real uid", "[policy][builder]") {
  for (const char* bad : {"-1", "4294967295", "4294967296", "18446744073709551616", " 0", "+0"}) {
    INFO(bad);
    CHECK_FALSE(flag_error({"--sandbox-user", bad}).empty());
  }
}

TEST_CASE("flag --python keeps an absolute interpreter path as given", "[policy][builder]") {
  CHECK(build({"--python", "/usr/bin/../bin/python3"}).python == "/usr/bin/python3");
  CHECK_THAT(flag_error({"--python", "/nonexistent/python3"}),
             Catch::Contains("not an executable file"));
  TempFile plain("not a program\n", ".txt");
  ::chmod(plain.path.c_str(), 0644);
  CHECK_THAT(flag_error({"--python", plain.path}), Catch::Contains("not an executable file"));
  CHECK_THAT(flag_error({"--python", "no-such-python-xyz"}), Catch::Contains("not found on PATH"));
}

// A launcher script is never run on the host as the kernel's user (it used to be asked for
// sys.executable through popen): it is refused with the command that prints the interpreter.
TEST_CASE("flag --python refuses a launcher script without running it", "[policy][builder]") {
  TempFile marker("", ".ran");
  std::remove(marker.path.c_str());
  TempFile shim("#!/bin/sh\ntouch " + marker.path + "\necho /usr/bin/python3\n", ".sh");
  ::chmod(shim.path.c_str(), 0755);
  std::string error = flag_error({"--python", shim.path});
  CHECK_THAT(error, Catch::StartsWith("--python " + shim.path + " is a script"));
  CHECK_THAT(error, Catch::Contains("-c 'import sys; print(sys.executable)'"));
  CHECK(error.find('\n') == std::string::npos);  // one line
  CHECK_FALSE(std::filesystem::exists(marker.path));
}

// pyenv puts its shims first on PATH: a bare name passes over them, without running them, to
// the first interpreter itself; a PATH with only scripts is refused the same way.
TEST_CASE("a bare --python name on PATH passes over launcher scripts", "[policy][builder]") {
  char templ[] = "/tmp/belljar-path-XXXXXX";
  REQUIRE(::mkdtemp(templ) != nullptr);
  fs::path root(templ);
  fs::create_directories(root / "shims");
  fs::create_directories(root / "bin");
  fs::path marker = root / "shim-ran";
  std::ofstream(root / "shims/python3") << "#!/bin/sh\ntouch " << marker.string() << "\n";
  ::chmod((root / "shims/python3").c_str(), 0755);
  fs::create_symlink("/usr/bin/python3", root / "bin/python3");
  const char* old = std::getenv("PATH");
  std::string saved = old ? old : "";
  ::setenv("PATH", ((root / "shims").string() + ":" + (root / "bin").string()).c_str(), 1);
  CHECK(build({"--python", "python3"}).python == (root / "bin/python3").string());
  ::setenv("PATH", (root / "shims").string().c_str(), 1);
  CHECK_THAT(flag_error({"--python", "python3"}), Catch::Contains("shims/python3 is a script"));
  ::setenv("PATH", saved.c_str(), 1);
  CHECK_FALSE(fs::exists(marker));
  fs::remove_all(root);
}

// A pyenv shim is resolved the way pyenv resolves it, by reading its version files, never by
// running it: the user's pyenv Python, not the system's, and nothing executed on the host.
TEST_CASE("a pyenv shim given as --python is resolved from pyenv's version files",
          "[policy][builder]") {
  char templ[] = "/tmp/belljar-pyenv-XXXXXX";
  REQUIRE(::mkdtemp(templ) != nullptr);
  fs::path root(templ);
  fs::create_directories(root / "shims");
  fs::create_directories(root / "versions/3.99/bin");
  fs::create_directories(root / "bin");
  fs::create_directories(root / "project");
  fs::path marker = root / "shim-ran";
  fs::path shim = root / "shims/python3";
  std::ofstream(shim) << "#!/bin/sh\ntouch " << marker.string() << "\n";
  ::chmod(shim.c_str(), 0755);
  fs::create_symlink("/usr/bin/python3", root / "versions/3.99/bin/python3");
  fs::create_symlink("/usr/bin/python3", root / "bin/python3");
  std::ofstream(root / "version") << "# the global version\n3.99\n";
  const std::string pyenv_python = (root / "versions/3.99/bin/python3").string();
  std::string saved_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  const char* saved_version = std::getenv("PYENV_VERSION");
  std::string saved_version_text = saved_version ? saved_version : "";
  fs::path saved_cwd = fs::current_path();
  ::unsetenv("PYENV_VERSION");

  // The global version file; as an explicit path and found on PATH.
  CHECK(build({"--python", shim.string()}).python == pyenv_python);
  ::setenv("PATH", ((root / "shims").string() + ":" + (root / "bin").string()).c_str(), 1);
  CHECK(build({"--python", "python3"}).python == pyenv_python);
  // A project's .python-version wins over the global one; a version not installed is skipped.
  std::ofstream(root / "project/.python-version") << "3.98 3.99\n";
  fs::current_path(root / "project");
  CHECK(build({"--python", "python3"}).python == pyenv_python);
  fs::current_path(saved_cwd);
  // PYENV_VERSION=system: the shim stands aside for the next interpreter on PATH.
  ::setenv("PYENV_VERSION", "system", 1);
  CHECK(build({"--python", "python3"}).python == (root / "bin/python3").string());
  // A version that would leave versions/ is never followed: the script is refused.
  ::setenv("PYENV_VERSION", "../../bin", 1);
  CHECK_THAT(flag_error({"--python", shim.string()}), Catch::Contains("is a script"));

  ::setenv("PATH", saved_path.c_str(), 1);
  if (saved_version)
    ::setenv("PYENV_VERSION", saved_version_text.c_str(), 1);
  else
    ::unsetenv("PYENV_VERSION");
  CHECK_FALSE(fs::exists(marker));
  fs::remove_all(root);
}

TEST_CASE("without --python, python3 on PATH is resolved to an absolute path",
          "[policy][builder]") {
  Policy policy = collect({}).build();
  REQUIRE_FALSE(policy.python.empty());
  CHECK(policy.python[0] == '/');
  CHECK(::access(policy.python.c_str(), X_OK) == 0);
}

TEST_CASE("policy file holds the same settings as the flags", "[policy][builder][file]") {
  TempFile file(R"({
    "timeout": 30, "cpu": "1.5s", "memory": "512M", "pids": 64, "isolation": "none",
    "allow-net": ["pypi.org", "*.example.com:8443"], "pass-env": ["HOME", "LANG"],
    "set-env": {"MODE": "file", "N": 5}, "hide": ["*.csv"], "ro": ["/usr/share"]
  })");
  Policy policy = build({"--policy", file.path});
  CHECK(policy.timeout_seconds == Approx(30));
  CHECK(policy.cpu_limit() == Approx(1.5));
  CHECK(policy.memory_bytes == 512ull << 20);
  CHECK(policy.pids == 64);
  CHECK(policy.isolation == Isolation::none);
  REQUIRE(policy.allow_net.size() == 2);
  CHECK(policy.allow_net[1].host == "*.example.com");
  CHECK(policy.pass_env == std::vector<std::string>{"HOME", "LANG"});
  using Env = std::vector<std::pair<std::string, std::string>>;
  CHECK(policy.set_env == Env{{"MODE", "file"}, {"N", "5"}});
  CHECK(policy.hide == std::vector<std::string>{"*.csv"});
  CHECK(policy.read_only == std::vector<fs::path>{"/usr/share"});
}

TEST_CASE("flags override the --policy file wherever they appear", "[policy][builder][file]") {
  TempFile file(R"({"timeout": 30, "memory": "512M", "allow-net": ["pypi.org"]})");
  Policy after = build({"--policy", file.path, "--timeout", "10"});
  Policy before = build({"--timeout", "10", "--policy", file.path});
  CHECK(after.timeout_seconds == Approx(10));
  CHECK(before.timeout_seconds == Approx(10));
  CHECK(after.memory_bytes == 512ull << 20);
  // Repeatable settings add up: the file's, then the flags'.
  Policy both = build({"--policy", file.path, "--allow-net", "example.com"});
  REQUIRE(both.allow_net.size() == 2);
  CHECK(both.allow_net[0].host == "pypi.org");
  CHECK(both.allow_net[1].host == "example.com");
}

TEST_CASE("policy file path is remembered absolute for kernel.json", "[policy][builder][file]") {
  TempFile file("{}");
  auto builder = collect({"--policy", file.path});
  REQUIRE(builder.given().size() == 2);
  CHECK(builder.given()[1] == file.path);
  CHECK(fs::path(builder.given()[1]).is_absolute());
}

TEST_CASE("policy file problems are refused naming the file", "[policy][builder][file]") {
  auto build_error = [](const std::vector<std::string>& args) {
    return usage_error([&] { build(args); });
  };
  SECTION("unknown key") {
    TempFile file(R"({"timeout": 30, "memroy": "1G"})");
    CHECK_THAT(build_error({"--policy", file.path}),
               Catch::Contains(file.path) && Catch::Contains("unknown setting \"memroy\""));
  }
  SECTION("a policy file cannot include another") {
    TempFile file(R"({"policy": "/etc/other.json"})");
    CHECK_THAT(build_error({"--policy", file.path}), Catch::Contains("unknown setting \"policy\""));
  }
  SECTION("flag names keep no dashes") {
    TempFile file(R"({"--timeout": 30})");
    CHECK_THAT(build_error({"--policy", file.path}), Catch::Contains("unknown setting"));
  }
  SECTION("not JSON") {
    TempFile file("timeout = 30");
    CHECK_THAT(build_error({"--policy", file.path}), Catch::Contains("not valid JSON"));
  }
  SECTION("not an object") {
    TempFile file("[\"timeout\", 30]");
    CHECK_THAT(build_error({"--policy", file.path}), Catch::Contains("expected a JSON object"));
  }
  SECTION("value of the wrong type") {
    TempFile file(R"({"timeout": null})");
    CHECK_THAT(build_error({"--policy", file.path}), Catch::Contains("must be a string or number"));
  }
  SECTION("bad value inside the file") {
    TempFile file(R"({"memory": "12Q"})");
    CHECK_THAT(build_error({"--policy", file.path}), Catch::StartsWith("--memory 12Q:"));
  }
  SECTION("missing file") {
    CHECK_THAT(build_error({"--policy", "/nonexistent/policy.json"}),
               Catch::Contains("/nonexistent/policy.json") && Catch::Contains("cannot read"));
  }
}

TEST_CASE("the active-output flag: parse, policy file key, summary and help",
          "[policy][builder][active_output]") {
  CHECK(build({}).active_output == ActiveOutput::isolate);
  CHECK(build({"--active-output", "strip"}).active_output == ActiveOutput::strip);
  CHECK(build({"--active-output=allow"}).active_output == ActiveOutput::allow);
  for (auto mode : {ActiveOutput::isolate, ActiveOutput::strip, ActiveOutput::allow})
    CHECK(parse_active_output(active_output_name(mode)) == mode);
  CHECK(flag_error({"--active-output", "sometimes"}) ==
        "--active-output sometimes: expected isolate, strip or allow");
  TempFile file(R"({"active_output": "strip"})");
  Policy from_file = build({"--policy", file.path});
  CHECK(from_file.active_output == ActiveOutput::strip);
  CHECK(from_file.summary()["active_output"] == "strip");
  CHECK(build({"--policy", file.path, "--active-output", "isolate"}).active_output ==
        ActiveOutput::isolate);
  bool in_help = false;
  for (auto& [usage, meaning] : policy_flag_help())
    in_help = in_help || usage == "--active-output MODE";
  CHECK(in_help);
}
