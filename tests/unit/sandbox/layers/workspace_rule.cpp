// The workspace's rule, as components: ordinary names pass, a dot-path or an environment's
// folder anywhere on the way is closed, --protect closes what it names, --writable opens a path
// and lets the folders above it be made.
#include "sandbox/layers/workspace_rule.hpp"

#include <catch2/catch.hpp>

#include "sandbox/os/path_parts.hpp"

using namespace belljar;

namespace {

bool refused(const WorkspaceRule& rule, const std::string& path,
             NameChange change = NameChange::other) {
  return rule.refusal(path_components(path), change).has_value();
}

}  // namespace

TEST_CASE("ordinary files and folders are the sandbox's to change", "[workspace_rule]") {
  WorkspaceRule rule;
  for (const char* path : {"data.csv", "proj/out/figure.png", "a/b/c/d.txt", "notes..txt", "x.git",
                           "venv/lib/python3.11/thing.py"})
    CHECK_FALSE(refused(rule, path));
}

TEST_CASE("a dot-path anywhere on the way is closed", "[workspace_rule]") {
  WorkspaceRule rule;
  for (const char* path :
       {".gitconfig", ".local/bin/ls", ".config/autostart/x.desktop", "proj/.git/hooks/pre-commit",
        ".ipython/profile_default/startup/a.py", ".jupyter/custom/custom.js", "deep/a/.envrc"})
    CHECK(refused(rule, path));
  CHECK(*rule.refusal({".bashrc"}, NameChange::other) == "a dot-path, which host tools read");
}

TEST_CASE("a Python environment's packages are closed", "[workspace_rule]") {
  WorkspaceRule rule;
  CHECK(refused(rule, "lib/python3.11/site-packages/evil.pth"));
  CHECK(refused(rule, "venv/lib/python3/dist-packages"));
  CHECK(*rule.refusal({"site-packages"}, NameChange::make_folder) == "inside a Python environment");
}

TEST_CASE("a protect pattern closes what it names, at any depth it allows", "[workspace_rule]") {
  WorkspaceRule rule({"tools/deploy.sh", "/Makefile", "*.service"}, {});
  CHECK(refused(rule, "tools/deploy.sh"));
  CHECK(refused(rule, "sub/tools/deploy.sh"));
  CHECK(refused(rule, "Makefile"));
  CHECK_FALSE(refused(rule, "sub/Makefile"));       // anchored at the root
  CHECK(refused(rule, "units/web.service/notes"));  // below a protected path
  CHECK_FALSE(refused(rule, "tools/other.sh"));
  CHECK(*rule.refusal(path_components("tools/deploy.sh"), NameChange::other) == "protected");
}

TEST_CASE("a writable pattern opens a path, and the folders above it may be made",
          "[workspace_rule]") {
  WorkspaceRule rule({}, {".cache/myproject", ".git"});
  CHECK_FALSE(refused(rule, ".cache/myproject"));
  CHECK_FALSE(refused(rule, ".cache/myproject/deep/file.bin"));
  CHECK_FALSE(refused(rule, ".git/hooks/pre-commit"));
  CHECK_FALSE(refused(rule, ".cache", NameChange::make_folder));
  CHECK(refused(rule, ".cache"));  // a file named .cache is no folder above the pattern
  CHECK(refused(rule, ".cache/other", NameChange::make_folder));
  CHECK(refused(rule, ".config/x"));
  // --protect still wins inside an opened path
  CHECK(refused(WorkspaceRule({".git/hooks"}, {".git"}), ".git/hooks/pre-commit"));
}

TEST_CASE("the workspace itself is not the sandbox's to change", "[workspace_rule]") {
  CHECK(refused(WorkspaceRule{}, ""));
}
