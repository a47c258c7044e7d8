// The names a protected link leads through (held_names.hpp): its way on a real tree, the set the
// judge asks, and what one survey of a workspace holds.
#include "sandbox/layers/held_names.hpp"

#include <catch2/catch.hpp>

#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

using Parts = std::vector<std::string>;

std::vector<Parts> held_paths(const HeldNames& held) {
  std::vector<Parts> paths;
  for (const auto& name : held.names()) paths.push_back(name.path);
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

TEST_CASE("a link's way is every link it passes and where it ends", "[held-names]") {
  TempDir dir{"belljar-held"};
  std::string ws = dir.path.string();
  fs::create_directories(dir / "real");
  write_file(dir / "real/bashrc", "x");
  fs::create_directories(dir / "dotfiles");
  fs::create_symlink("../real/bashrc", dir / "dotfiles/bashrc");
  fs::create_symlink("dotfiles/bashrc", dir / ".bashrc");

  SECTION("a chain: both links, and the end") {
    LinkWay way = follow_link_way(ws + "/.bashrc");
    CHECK(way.links == std::vector<std::string>{ws + "/.bashrc", ws + "/dotfiles/bashrc"});
    REQUIRE(way.end);
    CHECK(*way.end == ws + "/real/bashrc");
    CHECK_FALSE(way.loops);
  }
  SECTION("an end that does not exist is taken as written") {
    fs::create_symlink("d2/missing/../myprofile", dir / ".profile");
    LinkWay way = follow_link_way(ws + "/.profile");
    REQUIRE(way.end);
    CHECK(*way.end == ws + "/d2/myprofile");
  }
  SECTION("a link to a folder, on the way to a name below it") {
    fs::create_directory_symlink("real", dir / "dlink");
    fs::create_symlink("dlink/bashrc", dir / ".zshrc");
    LinkWay way = follow_link_way(ws + "/.zshrc");
    CHECK(way.links == std::vector<std::string>{ws + "/.zshrc", ws + "/dlink"});
    CHECK(*way.end == ws + "/real/bashrc");
  }
  SECTION("an absolute link starts again from the root") {
    fs::create_symlink(ws + "/real/bashrc", dir / ".kshrc");
    CHECK(*follow_link_way(ws + "/.kshrc").end == ws + "/real/bashrc");
  }
  SECTION("a loop has no end") {
    fs::create_symlink("b", dir / "a");
    fs::create_symlink("a", dir / "b");
    LinkWay way = follow_link_way(ws + "/a");
    CHECK(way.loops);
    CHECK_FALSE(way.end);
    CHECK(way.links.size() == static_cast<size_t>(kMaxLinkHops) + 1);
  }
}

TEST_CASE("held names close themselves and what lies below; their folders are a way",
          "[held-names]") {
  HeldNames held;
  REQUIRE(held.hold("/w", "/w/dotfiles/bashrc", ".bashrc"));
  REQUIRE(held.hold("/w", "/w/data", ".vscode"));
  REQUIRE(held.hold("/w", "/etc/passwd", ".x"));   // outside: not the sandbox's
  REQUIRE(held.hold("/w", "/w/data", ".vscode"));  // once
  CHECK(held.size() == 2);

  REQUIRE(held.holding({"dotfiles", "bashrc"}));
  CHECK(held.holding({"dotfiles", "bashrc"})->link == ".bashrc");
  CHECK(held.holding({"data", "deep", "tasks.json"}));
  CHECK_FALSE(held.holding({"dotfiles"}));
  CHECK_FALSE(held.holding({"dotfiles", "other"}));
  CHECK_FALSE(held.holding({"datax"}));

  CHECK(held.beyond({"dotfiles"}).size() == 1);
  CHECK(held.beyond({}).size() == 2);
  CHECK(held.beyond({"dotfiles", "bashrc"}).empty());  // the name itself is held, not a way

  SECTION("a way that ends at the workspace itself holds all of it") {
    REQUIRE(held.hold("/w", "/w", ".git/x"));
    CHECK(held.holding({"anything"}));
  }
  SECTION("bounded") {
    HeldNames many;
    for (size_t i = 0; i < kMaxHeldNames; ++i)
      REQUIRE(many.hold("/w", "/w/f" + std::to_string(i), ".bashrc"));
    CHECK_FALSE(many.hold("/w", "/w/one-more", ".bashrc"));
    CHECK(many.size() == kMaxHeldNames);
  }
}

TEST_CASE("a survey holds the ways of protected links and of links in protected folders",
          "[held-names]") {
  TempDir dir{"belljar-held-survey"};
  std::string ws = dir.path.string();
  fs::create_directories(dir / "real");
  write_file(dir / "real/bashrc", "x");
  fs::create_directories(dir / "dotfiles");
  fs::create_symlink("../real/bashrc", dir / "dotfiles/bashrc");
  fs::create_symlink("dotfiles/bashrc", dir / ".bashrc");
  fs::create_symlink("d2/myprofile", dir / ".profile");  // its end is not there
  fs::create_directories(dir / ".git/hooks");
  fs::create_directories(dir / "hooks");
  write_file(dir / "hooks/pre-commit", "x");
  fs::create_symlink("../../hooks/pre-commit", dir / ".git/hooks/pre-commit");
  fs::create_directories(dir / "plain");
  fs::create_symlink("../real", dir / "plain/ordinary-link");  // no protected name: not held
  WorkspaceRules rules;
  rules.protect = {".bashrc", ".profile", ".git"};

  WorkspaceSurvey survey = survey_workspace(ws, rules);
  CHECK(held_paths(survey.held) == std::vector<Parts>{{".bashrc"},
                                                      {".git", "hooks", "pre-commit"},
                                                      {".profile"},
                                                      {"d2", "myprofile"},
                                                      {"dotfiles", "bashrc"},
                                                      {"hooks", "pre-commit"},
                                                      {"real", "bashrc"}});
  // The ends that exist are guarded too, as the link that leads there.
  std::vector<std::string> guarded;
  for (const auto& guard : survey.guards) guarded.push_back(guard.relative);
  std::sort(guarded.begin(), guarded.end());
  CHECK(guarded == std::vector<std::string>{".git", "hooks/pre-commit", "real/bashrc"});
}
