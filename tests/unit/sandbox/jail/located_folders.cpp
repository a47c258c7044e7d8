// The broker's kept folders: found again by identity or by path in the same generation, and a
// move or removal by anyone else (the host) of a kept folder or of one above it is seen before
// the broker answers its next call.
#include "sandbox/jail/located_folders.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "sandbox/os/path_parts.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

// The host's own root stands in for the sandbox's: a folder's text as /proc/self/fd shows it
// is then its path from that root, as it is for the broker.
struct Tree {
  // Not in /tmp: the kept folders' watches cover every folder above them, and tests run beside
  // this one remove their own folders in /tmp all the time (each removal fires the watch, as it
  // should). /var/tmp sees none of theirs.
  TempDir dir{"belljar-located", "/var/tmp"};
  Fd root{::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
  SandboxPaths paths{root.get()};
  LocatedFolders located;

  std::string text(const std::string& folder) const { return (dir.path / folder).string(); }
  std::vector<std::string> where(const std::string& folder) const {
    return path_components(text(folder));
  }
  // What the broker does after a walk that named a file in `folder`.
  void walk_and_remember(const std::string& folder) {
    WalkedPath at;
    REQUIRE(paths.walk(std::vector<std::string>{}, text(folder) + "/file", false, at) == 0);
    located.remember(root.get(), at, text(folder), 0);
  }
  bool watch_fired() {
    pollfd ready{located.watch_fd(), POLLIN, 0};
    return ::poll(&ready, 1, 0) == 1 && located.moved();
  }
};

}  // namespace

TEST_CASE("a kept folder is found by path and by identity in its generation", "[located_folders]") {
  Tree tree;
  fs::create_directories(tree.dir / "ws/out");
  tree.walk_and_remember("ws/out");
  const WalkStart* kept = tree.located.by_path(tree.text("ws/out"), 0);
  REQUIRE(kept != nullptr);
  CHECK(kept->where == tree.where("ws/out"));
  CHECK(tree.located.by_path(tree.text("ws/out"), 1) == nullptr);  // a later generation
  CHECK(tree.located.by_path(tree.text("ws"), 0) == nullptr);

  Fd cwd(::open((tree.dir / "ws/out").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  const WalkStart* found = tree.located.find(tree.paths, tree.root.get(), cwd.get(), 0);
  REQUIRE(found != nullptr);
  CHECK(found->where == tree.where("ws/out"));
  CHECK_FALSE(tree.watch_fired());  // nothing moved
}

TEST_CASE("the host moving a kept folder, or one above it, is seen", "[located_folders]") {
  Tree tree;
  fs::create_directories(tree.dir / "ws/a/out");
  fs::create_directories(tree.dir / "ws/b");
  tree.walk_and_remember("ws/a/out");
  tree.walk_and_remember("ws/b");
  REQUIRE_FALSE(tree.watch_fired());

  SECTION("the folder itself") {
    fs::rename(tree.dir / "ws/b", tree.dir / "ws/.git");
    CHECK(tree.watch_fired());
  }
  SECTION("a folder above it") {
    fs::rename(tree.dir / "ws/a", tree.dir / "ws/.config");
    CHECK(tree.watch_fired());
  }
  SECTION("the folder removed") {
    fs::remove(tree.dir / "ws/b");
    CHECK(tree.watch_fired());
  }
  SECTION("a file made or a sibling renamed is no move") {
    fs::create_directories(tree.dir / "ws/c");
    fs::rename(tree.dir / "ws/c", tree.dir / "ws/d");
    std::FILE* f = std::fopen((tree.dir / "ws/b/new").c_str(), "w");
    REQUIRE(f != nullptr);
    std::fclose(f);
    CHECK_FALSE(tree.watch_fired());
  }
}

TEST_CASE("a cwd the host moved is located afresh once the generation moves on",
          "[located_folders]") {
  Tree tree;
  fs::create_directories(tree.dir / "ws/cwd");
  Fd cwd(::open((tree.dir / "ws/cwd").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(tree.located.find(tree.paths, tree.root.get(), cwd.get(), 0) != nullptr);
  fs::rename(tree.dir / "ws/cwd", tree.dir / "ws/.git");
  REQUIRE(tree.watch_fired());  // the broker bumps its generation on this
  const WalkStart* now = tree.located.find(tree.paths, tree.root.get(), cwd.get(), 1);
  REQUIRE(now != nullptr);
  CHECK(now->where == tree.where("ws/.git"));
}
