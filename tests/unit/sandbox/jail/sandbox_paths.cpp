// The broker's resolver, on a real tree standing in for the sandbox's root: symlinks are walked
// by hand and land where the kernel would land, ".." stops at the root, absolute links restart
// from the root (not the host's), and what comes back names the folder the change lands in.
#include "sandbox/jail/sandbox_paths.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "sandbox/layers/workspace_rule.hpp"
#include "sandbox/os/path_parts.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

using Parts = std::vector<std::string>;

struct Root {
  TempDir dir{"belljar-paths"};
  Fd fd{::open(dir.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)};
  SandboxPaths paths{fd.get()};
};

}  // namespace

TEST_CASE("a symlinked parent resolves to the folder it names", "[sandbox_paths]") {
  Root root;
  fs::create_directories(root.dir / "home/.config/autostart");
  fs::create_directory_symlink(".config", root.dir / "home/cfg");
  WalkedPath at;
  REQUIRE(root.paths.walk({"home"}, "cfg/autostart/evil.desktop", false, at) == 0);
  CHECK(at.where == Parts{"home", ".config", "autostart"});
  CHECK(at.name == "evil.desktop");
  CHECK(at.marked.size() == 4);
}

TEST_CASE("an absolute link restarts at the sandbox's root, not the host's", "[sandbox_paths]") {
  Root root;
  fs::create_directories(root.dir / "work/.local/bin");
  fs::create_directories(root.dir / "etc");
  fs::create_directory_symlink("/work/.local", root.dir / "work/lcl");
  WalkedPath at;
  REQUIRE(root.paths.walk({"work"}, "lcl/bin/ls", false, at) == 0);
  CHECK(at.where == Parts{"work", ".local", "bin"});
  // ".." never climbs above the root
  REQUIRE(root.paths.walk(Parts{}, "../../../etc/passwd", false, at) == 0);
  CHECK(at.where == Parts{"etc"});
  CHECK(at.name == "passwd");
}

TEST_CASE("the last component is followed only when asked", "[sandbox_paths]") {
  Root root;
  fs::create_directories(root.dir / "w/.git");
  fs::create_symlink(".git/config", root.dir / "w/notes.txt");
  WalkedPath at;
  REQUIRE(root.paths.walk({"w"}, "notes.txt", false, at) == 0);
  CHECK(at.where == Parts{"w"});
  CHECK(at.name == "notes.txt");
  REQUIRE(root.paths.walk({"w"}, "notes.txt", true, at) == 0);
  CHECK(at.where == Parts{"w", ".git"});
  CHECK(at.name == "config");
}

TEST_CASE("errors are the kernel's: loops, files as folders, missing parents", "[sandbox_paths]") {
  Root root;
  fs::create_directories(root.dir / "a");
  fs::create_symlink("b", root.dir / "a/c");
  fs::create_symlink("c", root.dir / "a/b");
  write_file(root.dir / "a/file", "x");
  WalkedPath at;
  CHECK(root.paths.walk(Parts{}, "a/c/x", false, at) == ELOOP);
  CHECK(root.paths.walk(Parts{}, "a/file/x", false, at) == ENOTDIR);
  CHECK(root.paths.walk(Parts{}, "a/missing/x", false, at) == ENOENT);
  CHECK(root.paths.walk(Parts{}, "", false, at) == ENOENT);
  // a name that does not exist yet is still resolved: it is what a create makes
  REQUIRE(root.paths.walk(Parts{}, "a/new", false, at) == 0);
  CHECK(at.name == "new");
}

TEST_CASE("a path that ends at a folder names it from its parent", "[sandbox_paths]") {
  Root root;
  fs::create_directories(root.dir / "w/sub");
  WalkedPath at;
  REQUIRE(root.paths.walk({"w", "sub"}, "..", false, at) == 0);
  CHECK(at.where.empty());
  CHECK(at.name == "w");
  CHECK(at.dots_last);
  REQUIRE(root.paths.walk({"w"}, "sub/", false, at) == 0);
  CHECK(at.name == "sub");
  CHECK(at.trailing_slash);
  CHECK_FALSE(at.dots_last);
  REQUIRE(root.paths.walk(Parts{}, "/", false, at) == 0);
  CHECK(at.name.empty());
}

TEST_CASE("a symlink on procfs is not followed", "[sandbox_paths]") {
  Fd slash(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  SandboxPaths paths(slash.get());
  WalkedPath at;
  CHECK(paths.walk(Parts{}, "/proc/self/fd/1", false, at) == EXDEV);
  CHECK(at.where == Parts{"proc"});
  CHECK(at.name == "self");
  CHECK(at.rest_after_magic == Parts{"fd", "1"});
}

TEST_CASE("an open folder is located by its path, checked against the folder", "[sandbox_paths]") {
  TempDir dir{"belljar-locate"};
  fs::create_directories(dir / "sub");
  Fd slash(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  SandboxPaths paths(slash.get());
  Fd sub(::open((dir / "sub").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  Parts where;
  REQUIRE(paths.locate(sub.get(), where));
  CHECK(where == path_components((dir / "sub").string()));
  // a folder named from a root it does not lie in is not located
  Root other;
  CHECK_FALSE(other.paths.locate(sub.get(), where));
  // a removed folder is nowhere
  fs::remove(dir / "sub");
  CHECK_FALSE(paths.locate(sub.get(), where));
}

TEST_CASE("folders that are an environment's root are flagged on the way", "[sandbox_paths]") {
  TempDir dir{"belljar-marker"};
  fs::create_directories(dir / "w/venv/lib/python3.11");
  write_file(dir / "w/venv/pyvenv.cfg", "home = /usr/bin\n");
  Fd fd(::open(dir.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  SandboxPaths paths(fd.get(), &holds_python_environment);
  WalkedPath at;
  REQUIRE(paths.walk(Parts{}, "w/venv/lib/python3.11/evil.pth", false, at) == 0);
  CHECK(at.marked == std::vector<bool>{false, false, true, false, false});
  REQUIRE(paths.walk(Parts{}, "w/other", false, at) == 0);
  CHECK(at.marked == std::vector<bool>{false, false});
  // a conda environment has no pyvenv.cfg
  fs::create_directories(dir / "w/conda/conda-meta");
  fs::create_directories(dir / "w/conda/lib/python3.12");
  REQUIRE(paths.walk(Parts{}, "w/conda/lib/python3.12/sitecustomize.py", false, at) == 0);
  CHECK(at.marked == std::vector<bool>{false, false, true, false, false});
  // folders above `marks_from` (the broker's: above the workspace) are never looked at
  SandboxPaths below_w(fd.get(), &holds_python_environment, 3);
  REQUIRE(below_w.walk(Parts{}, "w/conda/lib/python3.12/x.py", false, at) == 0);
  CHECK(at.marked == std::vector<bool>{false, false, false, false, false});
}

TEST_CASE("a tree deeper than the descriptor limit is walked", "[sandbox_paths]") {
  Root root;
  Parts deep;
  fs::path here = root.dir.path;
  for (int i = 0; i < 300; ++i) {
    here /= "d";
    deep.push_back("d");
  }
  fs::create_directories(here);
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit tight = saved;
  tight.rlim_cur = 64;  // far fewer than the levels
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
  WalkedPath at;
  int error = root.paths.walk(deep, "../x", false, at);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  REQUIRE(error == 0);
  CHECK(at.where.size() == 299);
  CHECK(at.name == "x");
}

TEST_CASE("a walk from a located folder lands where one from the root does", "[sandbox_paths]") {
  TempDir dir{"belljar-start"};
  fs::create_directories(dir / "w/venv/sub");
  write_file(dir / "w/venv/pyvenv.cfg", "");
  fs::create_directory_symlink("/", dir / "w/venv/sub/up");
  Fd slash(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  SandboxPaths paths(slash.get(), &holds_python_environment);
  Fd sub(::open((dir / "w/venv/sub").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  WalkStart start;
  REQUIRE(paths.locate(sub.get(), start));
  CHECK(start.marked.size() == start.where.size() + 1);
  CHECK(start.marked[start.marked.size() - 2]);  // the venv, one above
  for (const char* path : {"x", "../y", "../../z", "up/tmp/q"}) {
    INFO(path);
    WalkedPath from_start, from_root;
    REQUIRE(paths.walk(start, path, false, from_start) == 0);
    REQUIRE(paths.walk(start.where, path, false, from_root) == 0);
    CHECK(from_start.where == from_root.where);
    CHECK(from_start.name == from_root.name);
    CHECK(from_start.marked == from_root.marked);
  }
}
