// The names a protected link leads through (held_names.hpp): its way on a real tree, the set the
// judge asks, and what one survey of a workspace holds.
#include "sandbox/layers/held_names.hpp"

#include <fcntl.h>

#include <catch2/catch.hpp>

#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/fd.hpp"
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

// .bashrc -> dotfiles/bashrc -> ../real/bashrc, the end there.
void make_chain(const TempDir& dir) {
  fs::create_directories(dir / "real");
  write_file(dir / "real/bashrc", "x");
  fs::create_directories(dir / "dotfiles");
  fs::create_symlink("../real/bashrc", dir / "dotfiles/bashrc");
  fs::create_symlink("dotfiles/bashrc", dir / ".bashrc");
}

}  // namespace

TEST_CASE("a link's way is every link it passes and where it ends", "[held-names]") {
  TempDir dir{"belljar-held"};
  std::string ws = dir.path.string();
  make_chain(dir);

  SECTION("a chain: both links, and the end") {
    LinkWay way = follow_link_way(ws + "/.bashrc");
    CHECK(way.links == std::vector<std::string>{ws + "/.bashrc", ws + "/dotfiles/bashrc"});
    REQUIRE(way.end);
    CHECK(*way.end == ws + "/real/bashrc");
    CHECK_FALSE(way.loops);
  }
  SECTION("an end that does not exist is taken as written; a folder left by .. is kept") {
    fs::create_symlink("d2/missing/../myprofile", dir / ".profile");
    LinkWay way = follow_link_way(ws + "/.profile");
    REQUIRE(way.end);
    CHECK(*way.end == ws + "/d2/myprofile");
    CHECK(way.left == std::vector<std::string>{ws + "/d2/missing"});
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

TEST_CASE("held names close themselves and what lies below, their folders are a way",
          "[held-names]") {
  HeldNames held;
  REQUIRE(held.hold({"dotfiles", "bashrc"}, ".bashrc"));
  REQUIRE(held.hold({"data"}, ".vscode"));
  REQUIRE(held.hold({"data"}, ".vscode"));  // once
  REQUIRE(held.keep_way({"dir"}, ".zshrc"));
  CHECK(held.size() == 3);

  REQUIRE(held.holding({"dotfiles", "bashrc"}));
  CHECK(held.holding({"dotfiles", "bashrc"})->link == ".bashrc");
  CHECK(held.holding({"data", "deep", "tasks.json"}));
  CHECK_FALSE(held.holding({"dotfiles"}));
  CHECK_FALSE(held.holding({"dotfiles", "other"}));
  CHECK_FALSE(held.holding({"datax"}));
  CHECK_FALSE(held.holding({"dir"}));  // a way kept is not closed itself
  CHECK_FALSE(held.holding({"dir", "x"}));

  CHECK(held.beyond({"dotfiles"}).size() == 1);
  CHECK(held.beyond({"dir"}).size() == 1);
  CHECK(held.beyond({}).size() == 3);
  CHECK(held.beyond({"dotfiles", "bashrc"}).empty());  // the name itself is held, not a way

  SECTION("a way that ends at the workspace itself holds all of it") {
    REQUIRE(held.hold({}, ".git/x"));
    CHECK(held.holding({"anything"}));
  }
  SECTION("bounded") {
    HeldNames many;
    for (size_t i = 0; i < kMaxHeldNames; ++i)
      REQUIRE(many.hold({"f" + std::to_string(i)}, ".bashrc"));
    CHECK_FALSE(many.hold({"one-more"}, ".bashrc"));
    CHECK_FALSE(many.keep_way({"one-more"}, ".bashrc"));
    CHECK(many.size() == kMaxHeldNames);
  }
}

TEST_CASE("a survey holds the ways of protected links and of links in protected folders",
          "[held-names]") {
  TempDir dir{"belljar-held-survey"};
  std::string ws = dir.path.string();
  make_chain(dir);
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
  // The links' own dot-names are closed by the rule already: not held again.
  CHECK(held_paths(survey.held) == std::vector<Parts>{{"d2", "myprofile"},
                                                      {"dotfiles", "bashrc"},
                                                      {"hooks", "pre-commit"},
                                                      {"real", "bashrc"}});
  // The ends that exist are guarded too, as the link that leads there.
  std::vector<std::string> guarded;
  for (const auto& guard : survey.guards) guarded.push_back(guard.relative);
  std::sort(guarded.begin(), guarded.end());
  CHECK(guarded == std::vector<std::string>{".git", "hooks/pre-commit", "real/bashrc"});
}

TEST_CASE("a survey follows every dot-name's link, the links in a way's end, and git's pointers",
          "[held-names]") {
  TempDir dir{"belljar-held-survey2"};
  std::string ws = dir.path.string();
  auto link = [&](const char* target, const char* at) {
    fs::create_directories((dir / at).parent_path());
    fs::create_symlink(target, dir / at);
  };
  fs::create_directories(dir / "dotfiles");
  link("dotfiles/gitconfig", ".gitconfig");  // no pattern names it: its dot does
  fs::create_directories(dir / "dotlocal/bin");
  link("dotlocal", ".local");  // a folded folder: all of dotlocal is the link's end
  fs::create_directories(dir / "dotfish");
  link("../dotfish", ".config/fish");
  link("../fishcfg/config.fish", "dotfish/config.fish");  // a link inside the end
  fs::create_directories(dir / "zdir");
  link("zdir/../zrc", ".zshrc");  // zdir is left by "..": kept a folder
  fs::create_directories(dir / "sub");
  write_file(dir / "sub/.git", "gitdir: ../subgit\n");  // a worktree's .git file
  fs::create_directories(dir / "subgit");
  write_file(dir / "subgit/config",
             "[core]\n\thooksPath = githooks\n[include]\n\tpath = ../extra.cfg\n");
  write_file(dir / "extra.cfg", "[Core]\n  HooksPath = \"../morehooks\" ; a comment\n");
  fs::create_directories(dir / "plain");
  link("../dotfiles", "plain/ordinary-link");  // no dot-name: not followed
  // A home's tools: thousands of links inside dot-folders, leading inside them. The rule closes
  // those names already: nothing held for them.
  fs::create_directories(dir / ".vscode-server/ext/node_modules/tool");
  link("../tool/cli.js", ".vscode-server/ext/node_modules/.bin/tool");
  // What --writable opens inside a dot-folder is held when a way leads there.
  link(".cache/myproject/rc", ".kshrc");

  WorkspaceRules rules;
  rules.writable = {".cache/myproject"};
  WorkspaceSurvey survey = survey_workspace(ws, rules);
  auto held = held_paths(survey.held);
  auto has = [&](Parts path) { return std::find(held.begin(), held.end(), path) != held.end(); };
  CHECK(has({"dotfiles", "gitconfig"}));
  CHECK(has({"dotlocal"}));
  CHECK(survey.held.holding({"dotlocal", "bin", "ls"}));
  CHECK(has({"dotfish"}));
  CHECK(has({"fishcfg", "config.fish"}));  // followed from inside dotfish
  CHECK(has({"zrc"}));
  CHECK(survey.held.beyond({"zdir"}).size() == 1);  // a way kept
  CHECK(has({"subgit"}));                           // the gitdir
  CHECK(has({"sub", "githooks"}));                  // hooksPath: from the worktree
  CHECK(has({"extra.cfg"}));                        // include.path: from the config's folder
  CHECK(has({"morehooks"}));                        // hooksPath in the included file
  CHECK_FALSE(has({"plain", "ordinary-link"}));
  for (const auto& name : held) CHECK(name.front().rfind(".vscode-server", 0) != 0);
  CHECK(has({".cache", "myproject", "rc"}));
  CHECK_FALSE(survey.held.holding({"plain", "x"}));
}

TEST_CASE("a newly held file open for writing is found, by a read lease", "[held-names]") {
  TempDir dir{"belljar-held-writers"};
  std::string ws = dir.path.string();
  write_file(dir / "later/bp", "x");
  write_file(dir / "data/tasks.json", "{}");
  write_file(dir / "quiet", "x");
  Fd writer(::open((dir / "later/bp").c_str(), O_WRONLY | O_CLOEXEC));
  Fd inner(::open((dir / "data/tasks.json").c_str(), O_RDWR | O_CLOEXEC));
  Fd reader(::open((dir / "quiet").c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE((writer && inner && reader));
  HeldNames before, now;
  REQUIRE(now.hold({"later", "bp"}, ".bash_logout"));
  REQUIRE(now.hold({"data"}, ".vscode"));
  REQUIRE(now.hold({"quiet"}, ".profile"));
  REQUIRE(now.hold({"missing"}, ".zshrc"));
  OpenWriters found = newly_held_writers(before, now, ws);
  std::sort(found.paths.begin(), found.paths.end());
  CHECK(found.paths == std::vector<std::string>{"data/tasks.json", "later/bp"});
  CHECK_FALSE(found.too_many);
  // Held already: not asked again (the sandbox could not have opened it since).
  CHECK(newly_held_writers(now, now, ws).paths.empty());
  writer.reset();
  inner.reset();
  CHECK(newly_held_writers(before, now, ws).paths.empty());
}

TEST_CASE("a way through /proc, or a link read as it changed, is unknown", "[held-names]") {
  TempDir dir{"belljar-held-proc"};
  std::string ws = dir.path.string();
  fs::create_symlink("/proc/self/cwd/x", dir / ".profile");
  LinkWay way = follow_link_way(ws + "/.profile");
  CHECK(way.unknown);
  CHECK_FALSE(way.end);
  WorkspaceSurvey survey = survey_workspace(ws, WorkspaceRules{});
  REQUIRE(survey.held.holding({"anything"}));
  CHECK(survey.held.holding({"anything"})->path.empty());  // the whole workspace
}

TEST_CASE(
    "git's config is read as git reads it, a worktree's commondir, bare repositories and "
    "the home's own config are followed",
    "[held-names]") {
  TempDir dir{"belljar-held-git"};
  std::string ws = dir.path.string();
  write_file(dir / "proj/.git/config",
             "[core] hooksPath = one-line-hooks ; a key on the section's line\n"
             "[include]\n\tpath = \"../extra\"-cfg\n"    // a quoted part and more: ../extra-cfg
             "[core]\n\tfsmonitor = tools/fsmon.sh\n");  // a command: the user's own code
  write_file(dir / "proj/extra-cfg", "[core]\n\thooksPath = cont\\\ninued\n");
  write_file(dir / "remote.git/worktrees/wt/commondir", "../..\n");
  write_file(dir / "wt/.git", "gitdir: ../remote.git/worktrees/wt\n");
  write_file(dir / "srv/app.git/HEAD", "ref: refs/heads/master\n");  // bare, by its shape
  fs::create_directories(dir / "srv/app.git/objects");
  fs::create_directories(dir / "srv/app.git/refs");
  write_file(dir / "srv/app.git/config", "[core]\n\thooksPath = " + ws + "/server-hooks\n");
  // The user's own config: an absolute path, and a relative one, which names a folder in each
  // repository.
  write_file(dir / ".gitconfig", "[core]\n\thooksPath = each-repo-hooks\n[include]\n\tpath = " +
                                     ws + "/shared.gitconfig\n");
  WorkspaceSurvey survey = survey_workspace(ws, WorkspaceRules{});
  auto held = held_paths(survey.held);
  auto has = [&](Parts path) { return std::find(held.begin(), held.end(), path) != held.end(); };
  CHECK(has({"proj", "one-line-hooks"}));
  CHECK(has({"proj", "extra-cfg"}));
  CHECK(has({"proj", "continued"}));  // from the included file, its value continued
  CHECK_FALSE(has({"proj", "tools", "fsmon.sh"}));
  CHECK(has({"remote.git"}));  // the shared repository
  CHECK(has({"server-hooks"}));
  CHECK(has({"shared.gitconfig"}));
  CHECK(has({"proj", "each-repo-hooks"}));
  CHECK(has({"wt", "each-repo-hooks"}));
  CHECK(has({"srv", "app.git", "each-repo-hooks"}));
}

// The fifth outside pass read configs that git reads and the survey did not. Each expected value
// is what `git config -f FILE --list` printed for the same text (git 2.39).
TEST_CASE("a git config's paths are read as git reads them", "[held-names]") {
  using Paths = std::vector<std::string>;
  CHECK(git_config_paths("\xEF\xBB\xBF[core]\n\thooksPath = githooks\n").hooks ==
        Paths{"githooks"});
  CHECK(git_config_paths("[includeIf \"gitdir:**[!]]\"] path = x\n").includes == Paths{"x"});
  CHECK(git_config_paths("[x \"]\"] [core] hooksPath = xh\n").hooks == Paths{"xh"});
  CHECK(git_config_paths("[core]\n\thooksPath = a\\bb\n").hooks == Paths{"a\bb"});
  CHECK(git_config_paths("[init]\n\ttemplateDir = tpl\n").templates == Paths{"tpl"});
  CHECK(git_config_paths("[core]\r\n\thooksPath = a\\\r\nb\r\n").hooks == Paths{"ab"});
  CHECK(git_config_paths("[core]\n\thooksPath = \"a b\" c ; comment\n").hooks == Paths{"a b c"});
  CHECK(git_config_paths("[Core]\n\tHooksPath = h\n[InClUdE]\n\tpath = i\n").includes ==
        Paths{"i"});
  // Not paths git follows: a command, another section's path, a commented line.
  GitConfigPaths none = git_config_paths(
      "[core]\n\tfsmonitor = ./run.sh\n[other]\n\tpath = p\n# [core] hooksPath = c\n");
  CHECK(none.hooks.empty());
  CHECK(none.includes.empty());
  CHECK(none.templates.empty());
}
