// The jail's pieces that need no process: patterns, secrets scan, environment, argv, the
// interpreter's layout and the seccomp filter's text.
#include "sandbox/jail_client/jail_plan.hpp"

#include <catch2/catch.hpp>

#include "sandbox/jail_client/environment.hpp"
#include "sandbox/jail_client/python_layout.hpp"
#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox/layers/seccomp_filter.hpp"
#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

TEST_CASE("hide patterns match names anywhere, suffix paths and anchored paths", "[sandbox]") {
  struct Row {
    const char* pattern;
    const char* path;
    bool matches;
  };
  const Row rows[] = {
      {".env", ".env", true},
      {".env", "app/.env", true},
      {".env", ".envrc", false},
      {".env.*", ".env.local", true},
      {".env.*", "deep/x/.env.production", true},
      {"*.pem", "certs/server.pem", true},
      {"*.pem", ".hidden.pem", true},
      {"*.pem", "server.pem.txt", false},
      {"id_rsa*", "home/.ssh2/id_rsa.pub", true},
      {".docker/config.json", ".docker/config.json", true},
      {".docker/config.json", "proj/.docker/config.json", true},
      {".docker/config.json", "config.json", false},
      {".docker/config.json", "other/config.json", false},
      {"/data/private", "data/private", true},
      {"/data/private", "x/data/private", false},
      {"secrets/", "a/secrets", true},
  };
  for (const auto& row : rows) {
    INFO(row.pattern << " vs " << row.path);
    CHECK(matches_hide_pattern(row.pattern, row.path) == row.matches);
  }
}

TEST_CASE("the secrets scan finds defaults and --hide, and follows symlinks only inside",
          "[sandbox]") {
  TempDir ws;
  TempDir outside;
  write_file(ws / ".env", "TOKEN=1");
  write_file(ws / "app/.env.local", "TOKEN=2");
  write_file(ws / ".ssh/id_rsa", "KEY");
  write_file(ws / "deep/a/server.pem", "PEM");
  write_file(ws / ".docker/config.json", "{}");
  write_file(ws / "notes.txt", "fine");
  write_file(ws / "mine.secret", "custom");
  write_file(ws / "config/real-credentials", "C");
  write_file(outside / "elsewhere.env", "X");
  fs::create_symlink(ws / "config/real-credentials", ws / "credentials.key");
  fs::create_symlink(outside / "elsewhere.env", ws / "remote.key");

  auto patterns = default_hidden_patterns();
  patterns.push_back("*.secret");
  auto masks = find_secrets(ws.path, patterns);
  std::map<std::string, bool> found;
  for (const auto& m : masks) found[m.relative] = m.directory;
  CHECK(found.count(".env"));
  CHECK(found.count("app/.env.local"));
  CHECK(found.count(".ssh"));
  CHECK(found[".ssh"] == true);
  CHECK_FALSE(found.count(".ssh/id_rsa"));  // inside a masked directory: covered
  CHECK(found.count("deep/a/server.pem"));
  CHECK(found.count(".docker/config.json"));
  CHECK(found.count("mine.secret"));
  CHECK(found.count("config/real-credentials"));  // the symlink's target, inside the workspace
  CHECK_FALSE(found.count("remote.key"));         // points outside: resolves inside the jail
  CHECK_FALSE(found.count("notes.txt"));
}

TEST_CASE("the sandbox environment is built from the allowlist", "[sandbox]") {
  Policy policy;
  policy.pass_env = {"PASSED", "ABSENT"};
  policy.set_env = {{"SET", "1"}, {"LANG", "override"}};
  const char* host[] = {"PATH=/root/.pyenv/shims:/usr/bin",
                        "HOME=/root",
                        "JPY_SESSION=secret",
                        "AWS_SECRET_ACCESS_KEY=x",
                        "LANG=C.UTF-8",
                        "LC_ALL=C",
                        "TERM=xterm",
                        "TZ=UTC",
                        "PASSED=yes",
                        "LD_PRELOAD=/evil.so",
                        nullptr};
  auto env = sandbox_environment(policy, {"/opt/py/bin"}, "/home/sandbox", host);
  std::map<std::string, std::string> vars;
  for (const auto& e : env) vars[e.substr(0, e.find('='))] = e.substr(e.find('=') + 1);
  CHECK(vars["HOME"] == "/home/sandbox");
  CHECK(vars["PATH"] == "/opt/py/bin:/usr/local/bin:/usr/bin:/bin");
  CHECK(vars["LANG"] == "override");
  CHECK(vars["LC_ALL"] == "C");
  CHECK(vars["TERM"] == "xterm");
  CHECK(vars["TZ"] == "UTC");
  CHECK(vars["PASSED"] == "yes");
  CHECK(vars["SET"] == "1");
  CHECK_FALSE(vars.count("JPY_SESSION"));
  CHECK_FALSE(vars.count("AWS_SECRET_ACCESS_KEY"));
  CHECK_FALSE(vars.count("LD_PRELOAD"));
  CHECK_FALSE(vars.count("ABSENT"));
}

TEST_CASE("the worker's bootstrap quotes the package directory as a Python literal", "[sandbox]") {
  auto argv = worker_argv("/usr/bin/python3", "/tmp/it's a \\ dir");
  REQUIRE(argv.size() == 5);
  CHECK(argv[1] == "-s");
  CHECK(argv[2] == "-E");
  CHECK(argv[3] == "-c");
  CHECK(argv[4] ==
        "import sys; sys.path.insert(0, '/tmp/it\\'s a \\\\ dir'); from belljar_worker.main import "
        "serve; serve()");
}

TEST_CASE("the interpreter's layout is read from its files", "[sandbox]") {
  SECTION("the system python keeps its name and /usr is its prefix") {
    auto layout = locate_python("/usr/bin/python3");
    CHECK(layout.exec_path == "/usr/bin/python3");
    REQUIRE(layout.prefixes.size() == 1);
    CHECK(layout.prefixes[0] == "/usr");
  }
  SECTION("a venv runs under its own name, with its base prefix bound too") {
    TempDir venv;
    fs::create_directories(venv / "bin");
    fs::create_symlink("/usr/bin/python3", venv / "bin/python");
    write_file(venv / "pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n");
    auto layout = locate_python((venv / "bin/python").string());
    CHECK(layout.exec_path == (venv / "bin/python").string());
    REQUIRE(layout.prefixes.size() == 2);
    CHECK(layout.prefixes[0] == venv.path);
    CHECK(layout.prefixes[1] == "/usr");
  }
  SECTION("a script (a pyenv shim) is refused with the fix") {
    TempDir dir;
    write_file(dir / "python3", "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n");
    fs::permissions(dir / "python3", fs::perms::owner_all);
    CHECK_THROWS_WITH(locate_python((dir / "python3").string()), Catch::Contains("is a script"));
  }
}

TEST_CASE("debugpy is found among the interpreter's packages without running it",
          "[sandbox][python_layout]") {
  // The kernelspec's metadata.debugger (kernelspec.cpp) follows this.
  TempDir venv;
  fs::create_directories(venv / "bin");
  fs::create_symlink("/usr/bin/python3", venv / "bin/python");
  fs::create_directories(venv / "lib/python3.11/site-packages");
  auto venv_python = (venv / "bin/python").string();
  bool system_has_it = fs::exists("/usr/lib/python3/dist-packages/debugpy/__init__.py");

  write_file(venv / "pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n");
  auto isolated = locate_python(venv_python);
  CHECK(isolated.venv);
  CHECK_FALSE(isolated.system_site_packages);
  CHECK(site_package_dirs(isolated) ==
        std::vector<fs::path>{venv.path / "lib/python3.11/site-packages"});
  CHECK_FALSE(has_site_package(isolated, "debugpy"));  // the system's is not its own
  write_file(venv / "lib/python3.11/site-packages/debugpy/__init__.py", "");
  CHECK(has_site_package(locate_python(venv_python), "debugpy"));
  fs::remove_all(venv / "lib/python3.11/site-packages/debugpy");

  // A venv that includes the system's packages sees Debian's dist-packages too.
  write_file(venv / "pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = true\n");
  auto layered = locate_python(venv_python);
  CHECK(layered.system_site_packages);
  if (fs::is_directory("/usr/lib/python3/dist-packages")) {
    auto dirs = site_package_dirs(layered);
    CHECK(std::find(dirs.begin(), dirs.end(), fs::path("/usr/lib/python3/dist-packages")) !=
          dirs.end());
  }
  CHECK(has_site_package(layered, "debugpy") == system_has_it);
  CHECK(has_site_package(locate_python("/usr/bin/python3"), "debugpy") == system_has_it);
  CHECK_FALSE(has_site_package(locate_python("/usr/bin/python3"), "no_such_package_here"));
}

TEST_CASE("the seccomp filter refuses foreign ABIs and namespace clones", "[sandbox]") {
  std::string pfc = seccomp_pseudo_code({});
  INFO(pfc);
  auto badarch = pfc.find("invalid architecture action");
  REQUIRE(badarch != std::string::npos);
  CHECK(pfc.find("action ERRNO(1)", badarch) !=
        std::string::npos);  // i386/x32: refused, not killed
  CHECK(pfc.find("action ERRNO(1)") != std::string::npos);
  CHECK(pfc.find("ERRNO(38)") != std::string::npos);  // clone3: ENOSYS
  CHECK(pfc.find("KILL") == std::string::npos);       // refused, never killed
}

TEST_CASE("an interpreter without a standard library is refused rather than guessed at",
          "[sandbox]") {
  TempDir dir;
  write_file(dir / "bin/python3", std::string("\x7f"
                                              "ELF",
                                              4));
  fs::permissions(dir / "bin/python3", fs::perms::owner_all);
  CHECK_THROWS_WITH(locate_python((dir / "bin/python3").string()),
                    Catch::Contains("no standard library"));
}

TEST_CASE("binds that would cover the jail's own mounts are refused", "[sandbox]") {
  TempDir ws;
  TempDir pkg;
  write_file(pkg / "belljar_worker/__init__.py", "");
  Policy policy;
  policy.workspace = ws.path;
  policy.python = kTestPython;
  policy.read_only = {"/tmp"};
  CHECK_THROWS_WITH(
      make_jail_spec(policy, {kTestPython, pkg.path}, JailSpec::Mode::namespaces, nullptr),
      Catch::Contains("would cover the sandbox's own /tmp"));
  policy.read_only = {"/home"};
  CHECK_THROWS_WITH(
      make_jail_spec(policy, {kTestPython, pkg.path}, JailSpec::Mode::namespaces, nullptr),
      Catch::Contains("would cover the sandbox's own /home/sandbox"));
}

TEST_CASE("the policy's limits reach the spec the warden is sent", "[sandbox]") {
  TempDir ws;
  TempDir pkg;
  write_file(pkg / "belljar_worker/__init__.py", "");
  Policy policy;
  policy.workspace = ws.path;
  policy.python = kTestPython;
  JailSpec spec =
      make_jail_spec(policy, {kTestPython, pkg.path}, JailSpec::Mode::namespaces, nullptr);
  CHECK(spec.open_files == 4096);  // the default --open-files
  policy.memory_bytes = 96ull << 20;
  policy.pids = 33;
  policy.open_files = 321;
  policy.file_size_bytes = 5ull << 20;
  policy.tmp_size_bytes = 7ull << 20;
  spec = make_jail_spec(policy, {kTestPython, pkg.path}, JailSpec::Mode::landlock, nullptr);
  CHECK(spec.memory_bytes == 96ull << 20);
  CHECK(spec.pids == 33);
  CHECK(spec.open_files == 321);
  CHECK(spec.file_size_bytes == 5ull << 20);
  CHECK(spec.tmp_size_bytes == 7ull << 20);
}

TEST_CASE("the links on the way to an --ro part are protected by their own names", "[sandbox]") {
  TempDir ws;
  std::filesystem::create_directories(ws.path / "real/deep");
  write_file(ws.path / "real/deep/a.txt", "keep");
  std::filesystem::create_directory_symlink("real", ws.path / "lnk");
  std::filesystem::create_directory_symlink("lnk", ws.path / "chain");
  std::filesystem::create_directory_symlink("../lnk/deep", ws.path / "real/up");
  auto ws_real = std::filesystem::canonical(ws.path);
  CHECK(read_only_link_patterns(ws.path / "real/deep", ws_real).empty());
  CHECK(read_only_link_patterns(ws.path / "lnk", ws_real) == std::vector<std::string>{"/lnk"});
  // A link in the middle, a chain of links, and a link reached through another.
  CHECK(read_only_link_patterns(ws.path / "lnk/deep/a.txt", ws_real) ==
        std::vector<std::string>{"/lnk"});
  CHECK(read_only_link_patterns(ws.path / "chain", ws_real) ==
        std::vector<std::string>{"/chain", "/lnk"});
  CHECK(read_only_link_patterns(ws.path / "chain/up/a.txt", ws_real) ==
        std::vector<std::string>{"/chain", "/lnk", "/real/up", "/lnk"});

  // Through the spec: both names are protected, the target is bound.
  TempDir pkg;
  write_file(pkg / "belljar_worker/__init__.py", "");
  Policy policy;
  policy.workspace = ws.path;
  policy.python = kTestPython;
  policy.read_only = {ws_real / "real"};
  policy.read_only_given = {ws.path / "chain"};
  JailSpec spec =
      make_jail_spec(policy, {kTestPython, pkg.path}, JailSpec::Mode::namespaces, nullptr);
  for (const char* name : {"/chain", "/lnk"})
    CHECK(std::count(spec.protect_patterns.begin(), spec.protect_patterns.end(), name) == 1);
  CHECK(std::count(spec.binds.begin(), spec.binds.end(),
                   JailBind{(ws_real / "real").string(), (ws_real / "real").string(),
                            JailBind::Kind::read_only}) == 1);
}
