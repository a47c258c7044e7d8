// The broker's judge as a table: a real folder stands in for the sandbox's root (a workspace
// "ws" and a writable "tmp" in it, the rest outside every root), each path is walked as the broker
// walks it, and each row says what the judge answers for one change: 0, or the errno the cell
// gets. Every class the red team used is a row, with plain files and folders as the controls.
#include "sandbox/jail/workspace_judge.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sandbox/layers/syscall_table.hpp"
#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/path_parts.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

using Parts = std::vector<std::string>;

void touch(const fs::path& path) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "x";
}

// The sandbox's root, its workspace at /ws, the judge's settings as the warden gives them.
struct Scene {
  TempDir dir{"belljar-judge"};
  fs::path ws = dir / "ws";
  WorkspaceRule rule{{"tools/deploy.sh", "a/b/c.sh"}, {".cache/myproject"}, {"*.pem", "id_rsa*"}};
  Parts workspace{"ws"};
  std::vector<Parts> roots{{"ws"}, {"tmp"}};
  Fd root{::open(dir.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)};
  std::vector<BrokerRefusal> refused;
  WorkspaceJudge judge{rule, workspace, roots, root.get(),
                       [this](BrokerRefusal r) { refused.push_back(r); }};

  Scene() {
    for (const char* folder : {"proj/sub",
                               "proj/bin",
                               "proj/.git/hooks",
                               ".git",
                               ".cache/myproject",
                               "course",
                               "venv/lib/python3.11/site-packages",
                               "conda/conda-meta",
                               "conda/etc/conda/activate.d",
                               "prefix/bin",
                               "prefix/lib/python3.11",
                               "half/bin",
                               "half/lib/python3.11",
                               "half2/bin",
                               "half2/lib",
                               "pythons/python3.11",
                               "home/bin/sub",
                               "tools",
                               "a/b",
                               "carrier/.git",
                               "envcarrier/inner",
                               "plain/deeper",
                               "json"})
      fs::create_directories(ws / folder);
    for (const char* file :
         {"data.csv", "proj/notes.md", "venv/pyvenv.cfg", "prefix/bin/python3", "half2/bin/python3",
          "home/.profile", "tools/deploy.sh", "a/b/c.sh", "carrier/.git/config",
          "envcarrier/inner/pyvenv.cfg", "plain/deeper/x.txt", ".bashrc"})
      touch(ws / file);
    fs::create_directories(dir / "tmp");
    fs::create_directories(dir / "etc");
    touch(dir / "etc/passwd");
    fs::create_directory_symlink(".git", ws / "tolink");
    REQUIRE(root);
  }

  // Another judge of this scene's: degraded mode's (`links_by_name`), or holding `held`.
  WorkspaceJudge judge_with(bool links_by_name, const HeldNames* held) {
    return WorkspaceJudge{
        rule, workspace,     roots, root.get(), [this](BrokerRefusal r) { refused.push_back(r); },
        {},   links_by_name, held};
  }

  // The path walked as the broker walks it: components from the root, environments marked from
  // the workspace down.
  WalkedPath walk(const std::string& path, bool follow_last = false) const {
    SandboxPaths paths(root.get(), &holds_host_run_folder, workspace.size());  // as the broker
    WalkedPath at;
    REQUIRE(paths.walk(Parts{}, path, follow_last, at) == 0);
    return at;
  }
  struct stat lstat_of(const std::string& path) const {
    struct stat st {};
    REQUIRE(::lstat((dir.path.string() + path).c_str(), &st) == 0);
    return st;
  }
};

struct Row {
  const char* path;
  Change change;
  int expected;
};

struct RenameRow {
  const char* from;
  const char* to;
  unsigned flags;
  int expected;
};

const char* spelled(Change change) {
  return change == Change::make_folder ? "make_folder" : change_name(change);
}

void check_rows(Scene& scene, std::initializer_list<Row> rows) {
  for (const auto& row : rows) {
    INFO(row.path << " " << spelled(row.change));
    scene.refused.clear();
    CHECK(scene.judge.decide(scene.walk(row.path), row.change) == row.expected);
    // A refusal in the workspace is on record; an allowed change, or the kernel's own answer
    // outside the workspace, is not.
    std::string path = row.path;
    bool in_workspace = path == "/ws" || path.rfind("/ws/", 0) == 0;
    CHECK(scene.refused.size() == (row.expected && in_workspace ? 1u : 0u));
  }
}

}  // namespace

TEST_CASE("plain files and folders in the workspace are the sandbox's to change",
          "[workspace-judge]") {
  Scene scene;
  check_rows(scene, {
                        {"/ws/data.csv", Change::write, 0},
                        {"/ws/data.csv", Change::remove, 0},
                        {"/ws/data.csv", Change::mode, 0},
                        {"/ws/data.csv", Change::times, 0},
                        {"/ws/data.csv", Change::owner, 0},
                        {"/ws/new.txt", Change::create, 0},
                        {"/ws/proj/sub/deep.txt", Change::create, 0},
                        {"/ws/newdir", Change::make_folder, 0},
                        {"/ws/proj/notes.md", Change::rename, 0},
                        {"/ws/proj/bin/run.sh", Change::create, 0},  // no shell start-up beside
                        {"/ws/helpers.py", Change::create, 0},
                        {"/ws/json", Change::make_folder, 0},  // a name every Python has
                        {"/ws/json/data.py", Change::create, 0},
                        {"/ws/half2/lib/helpers", Change::create, 0},
                        {"/ws/k.pem.txt", Change::create, 0},
                    });
}

TEST_CASE("a dot component at any depth is closed", "[workspace-judge]") {
  Scene scene;
  check_rows(scene, {
                        {"/ws/.bashrc", Change::write, EACCES},
                        {"/ws/.gitconfig", Change::create, EACCES},
                        {"/ws/.git/config", Change::create, EACCES},
                        {"/ws/proj/.git/hooks/pre-commit", Change::create, EACCES},
                        {"/ws/proj/.envrc", Change::create, EACCES},
                        {"/ws/.local", Change::make_folder, EACCES},
                        {"/ws/.bashrc", Change::remove, EACCES},
                        {"/ws/.bashrc", Change::rename, EACCES},
                        {"/ws/.bashrc", Change::mode, EPERM},
                        {"/ws/.bashrc", Change::times, EPERM},
                        {"/ws/.bashrc", Change::owner, EPERM},
                        // --writable opens a dot path and lets the folders above it be made
                        {"/ws/.cache/myproject/x", Change::create, 0},
                        {"/ws/.cache", Change::make_folder, 0},
                        {"/ws/.cache/other", Change::create, EACCES},
                        // the morgue, whatever --writable says
                        {"/ws/.belljar-morgue", Change::make_folder, EACCES},
                    });
  scene.refused.clear();
  scene.judge.decide(scene.walk("/ws/proj/.git/hooks/pre-commit"), Change::create);
  REQUIRE(scene.refused.size() == 1);
  CHECK(scene.refused[0].path == "proj/.git/hooks/pre-commit");
  CHECK(scene.refused[0].change == "create");
}

TEST_CASE("nothing inside a Python environment, nor a name that completes one",
          "[workspace-judge]") {
  Scene scene;
  check_rows(scene, {
                        // pyvenv.cfg, conda-meta, bin/python* beside lib/python3.*: on disk
                        {"/ws/venv/lib/python3.11/site-packages/evil.pth", Change::create, EACCES},
                        {"/ws/venv/pyvenv.cfg", Change::remove, EACCES},
                        {"/ws/venv/notes.txt", Change::create, EACCES},
                        {"/ws/conda/etc/conda/activate.d/x.sh", Change::create, EACCES},
                        {"/ws/conda/README", Change::create, EACCES},
                        {"/ws/prefix/lib/python3.11/site.py", Change::create, EACCES},
                        {"/ws/prefix/bin/python3", Change::mode, EPERM},
                        // names that would make their folder an environment
                        {"/ws/pyvenv.cfg", Change::create, EACCES},
                        {"/ws/proj/conda-meta", Change::make_folder, EACCES},
                        {"/ws/half/bin/python3", Change::create, EACCES},
                        {"/ws/half2/lib/python3.12", Change::make_folder, EACCES},
                        // site-packages anywhere by its name
                        {"/ws/proj/site-packages", Change::make_folder, EACCES},
                    });
  scene.refused.clear();
  scene.judge.decide(scene.walk("/ws/venv/notes.txt"), Change::create);
  REQUIRE(scene.refused.size() == 1);
  CHECK(scene.refused[0].reason == "inside a Python environment");
}

TEST_CASE("a home's bin, a host module's name, a secret, a protected path", "[workspace-judge]") {
  Scene scene;
  check_rows(scene,
             {
                 // a folder holding a shell's start-up file is a home: its bin is on PATH
                 {"/ws/home/bin/git", Change::create, EACCES},
                 {"/ws/home/bin/sub/x", Change::create, EACCES},
                 {"/ws/home/notes.txt", Change::create, 0},
                 // host_modules.cpp: what a host Python imports from its folder
                 {"/ws/json.py", Change::create, EACCES},
                 {"/ws/course/zmq.py", Change::create, EACCES},
                 {"/ws/ipykernel_launcher.py", Change::create, EACCES},
                 {"/ws/numpydoc", Change::make_folder, EACCES},
                 {"/ws/json", Change::rename, EACCES},  // a package renamed into place
                                                        // secrets' names (--hide and the defaults)
                 {"/ws/server.pem", Change::create, EACCES},
                 {"/ws/proj/id_rsa", Change::create, EACCES},
                 // --protect, at the depth it names
                 {"/ws/tools/deploy.sh", Change::write, EACCES},
                 {"/ws/a/b/c.sh", Change::remove, EACCES},
                 {"/ws/tools/other.sh", Change::create, 0},
             });
}

TEST_CASE("outside the workspace only below a writable root, with the kernel's errno",
          "[workspace-judge]") {
  Scene scene;
  check_rows(scene, {
                        {"/tmp/scratch", Change::create, 0},
                        {"/tmp/.bashrc", Change::create, 0},  // the rule is the workspace's
                        {"/tmp", Change::write, 0},           // a root itself: only written into
                        {"/tmp", Change::rename, EACCES},
                        {"/etc/passwd", Change::write, EACCES},
                        {"/etc/cron.d", Change::make_folder, EACCES},
                        {"/ws", Change::rename, EACCES},  // the workspace itself
                    });
}

TEST_CASE("a path through a link is judged where it lands", "[workspace-judge]") {
  Scene scene;
  // ws/tolink -> .git: the name is judged as .git/config, not tolink/config
  WalkedPath at = scene.walk("/ws/tolink/config", true);
  CHECK(at.where == Parts{"ws", ".git"});
  CHECK(scene.judge.decide(at, Change::write) == EACCES);
}

TEST_CASE("a link in the workspace leads only to an ordinary place in it", "[workspace-judge]") {
  Scene scene;
  struct LinkRow {
    const char* at;
    const char* target;
    int expected;
  };
  for (const auto& row : std::initializer_list<LinkRow>{
           {"/ws/l1", "proj", 0},
           {"/ws/l2", "data.csv", 0},
           {"/ws/proj/l3", "../data.csv", 0},
           {"/ws/l4", "/ws/proj/notes.md", 0},
           {"/ws/l5", "/etc/passwd", EACCES},
           {"/ws/l6", "../tmp/x", EACCES},
           {"/ws/l7", ".", EACCES},  // the workspace itself
           {"/ws/l8", ".git/config", EACCES},
           // The target is judged by the rule's components only: the walk to it marks no
           // environment (what a write through the link lands in is, below).
           {"/ws/l9", "venv/lib", 0},
           {"/ws/l10", "missing/x", EACCES},  // cannot be resolved: refused
           {"/tmp/l11", "/etc", 0},           // outside the workspace, its text is not looked at
       }) {
    INFO(row.at << " -> " << row.target);
    scene.refused.clear();
    CHECK(scene.judge.decide_link(scene.walk(row.at), row.target) == row.expected);
    if (row.expected) CHECK(scene.refused.size() == 1);
  }
  // Written through, a link is judged where it lands: inside the environment.
  fs::create_directory_symlink("venv/lib", scene.ws / "l9");
  CHECK(scene.judge.decide(scene.walk("/ws/l9/evil.pth"), Change::create) == EACCES);
  // A hard link never reaches the judge: the filter refuses it, as it refuses extended
  // attributes (a mode set as an ACL).
  for (const char* call : {"link", "linkat"}) {
    INFO(call);
    REQUIRE(classified(call));
    CHECK(classified(call)->kind == SyscallClass::refused);
    CHECK(classified(call)->error == EPERM);
  }
  for (const char* call : {"setxattr", "lsetxattr", "fsetxattr", "removexattr"}) {
    INFO(call);
    REQUIRE(classified(call));
    CHECK(classified(call)->kind == SyscallClass::refused);
    CHECK(classified(call)->error == EOPNOTSUPP);
  }
}

TEST_CASE("a mode sets no id bit and hides no folder from the survey", "[workspace-judge]") {
  Scene scene;
  struct ModeRow {
    const char* path;
    mode_t mode;
    int expected;
    bool recorded;
  };
  for (const auto& row : std::initializer_list<ModeRow>{
           {"/ws/data.csv", 0600, 0, false},
           {"/ws/data.csv", 0, 0, false},  // a file its owner cannot read is still counted
           {"/ws/data.csv", 04755, EPERM, false},
           {"/ws/data.csv", 02755, EPERM, false},
           {"/ws/proj", 0700, 0, false},
           {"/ws/proj", 0300, EPERM, true},  // the survey could not read it
           {"/ws/proj", 0600, EPERM, true},  // nor search it
           {"/ws/.git", 0700, EPERM, true},
           {"/tmp", 0777, EACCES, false},  // a root itself: not the worker's to re-mode
       }) {
    INFO(row.path << " " << std::oct << row.mode);
    scene.refused.clear();
    CHECK(scene.judge.decide_mode(scene.walk(row.path), scene.lstat_of(row.path), row.mode) ==
          row.expected);
    CHECK(scene.refused.size() == (row.recorded ? 1u : 0u));
  }
}

TEST_CASE("a rename carries nothing closed away, and completes no environment",
          "[workspace-judge]") {
  Scene scene;
  for (const auto& row : std::initializer_list<RenameRow>{
           {"/ws/plain", "/ws/plain2", 0, 0},
           {"/ws/data.csv", "/ws/proj/data.csv", 0, 0},
           {"/ws/data.csv", "/ws/.bashrc", 0, EACCES},       // onto a dot name
           {"/ws/.bashrc", "/ws/bashrc", 0, EACCES},         // a dot name away
           {"/ws/carrier", "/ws/carried", 0, EACCES},        // it holds .git/config
           {"/ws/tools", "/ws/tools2", 0, EACCES},           // a protected path's ancestor
           {"/ws/a", "/ws/z", 0, EACCES},                    // --protect a/b/c.sh, two up
           {"/ws/envcarrier", "/ws/moved", 0, EACCES},       // it holds an environment
           {"/ws/venv", "/ws/venv2", 0, EACCES},             // it is one
           {"/ws/prefix", "/ws/prefix2", 0, EACCES},         // by its shape
           {"/ws/plain", "/ws/proj/.git/plain", 0, EACCES},  // into a closed place
           {"/ws/pythons", "/ws/half2/lib2", 0, 0},          // a folder of python3.* folders
           {"/ws/pythons", "/ws/half2/libx", 0, 0},          // ... under another name
           {"/tmp", "/ws/tmp", 0, EACCES},                   // a root itself
           {"/ws/plain", "/tmp/plain", 0, 0},                // out of the workspace
       }) {
    INFO(row.from << " -> " << row.to);
    CHECK(scene.judge.decide_rename(scene.walk(row.from), scene.walk(row.to), row.flags) ==
          row.expected);
  }
  // As half2's lib beside bin/python3, a folder of python3.* folders would complete a prefix.
  fs::remove(scene.ws / "half2/lib");
  CHECK(scene.judge.decide_rename(scene.walk("/ws/pythons"), scene.walk("/ws/half2/lib"), 0) ==
        EACCES);
}

TEST_CASE("an exchange is judged both ways", "[workspace-judge]") {
  Scene scene;
  // A plain folder for one that holds a closed name: moved one way, nothing closed goes; the
  // other way, .git/config does.
  CHECK(scene.judge.decide_rename(scene.walk("/ws/plain"), scene.walk("/ws/carrier"), 0) == 0);
  CHECK(scene.judge.decide_rename(scene.walk("/ws/plain"), scene.walk("/ws/carrier"),
                                  RENAME_EXCHANGE) == EACCES);
  // An empty lib for a folder of python3.* folders: exchanged, that folder becomes half2's lib
  // beside bin/python3.
  CHECK(scene.judge.decide_rename(scene.walk("/ws/half2/lib"), scene.walk("/ws/pythons"), 0) == 0);
  scene.refused.clear();
  CHECK(scene.judge.decide_rename(scene.walk("/ws/half2/lib"), scene.walk("/ws/pythons"),
                                  RENAME_EXCHANGE) == EACCES);
  REQUIRE(scene.refused.size() == 1);
  CHECK(scene.refused[0].path == "half2/lib");
  CHECK(scene.refused[0].change == "rename");
}

TEST_CASE("a replacement the objects' kinds forbid is refused as the kernel would",
          "[workspace-judge]") {
  Scene scene;
  struct stat folder = scene.lstat_of("/ws/plain"), file = scene.lstat_of("/ws/data.csv");
  CHECK(WorkspaceJudge::replacement_refusal(folder, file) == ENOTDIR);
  CHECK(WorkspaceJudge::replacement_refusal(file, folder) == EISDIR);
  CHECK(WorkspaceJudge::replacement_refusal(file, file) == 0);
  CHECK(WorkspaceJudge::replacement_refusal(folder, folder) == 0);
}

namespace {

// The sandbox's mounts as the warden's list gives them: an --ro folder, a guard over the file a
// host's link with a protected name leads to (.bashrc -> dotfiles/bashrc), the private /tmp.
struct MountedScene : Scene {
  SandboxMounts mounts{
      std::vector<Parts>{{}, {"ws", "ref"}, {"ws", "dotfiles", "bashrc"}, {"tmp"}}};
  bool readable = true;
  WorkspaceJudge mounted{rule,
                         workspace,
                         roots,
                         root.get(),
                         [this](BrokerRefusal r) { refused.push_back(r); },
                         [this] { return readable ? &mounts : nullptr; }};

  MountedScene() {
    fs::create_directories(ws / "ref/inner");
    fs::create_directories(ws / "dotfiles");
    touch(ws / "dotfiles/bashrc");
    touch(ws / "dotfiles/other");
  }
};

struct MoveRow {
  const char* from;
  const char* to;  // none: a removal of `from`
  unsigned flags;
  int expected;
};

void check_moves(MountedScene& scene, std::initializer_list<MoveRow> rows) {
  for (const auto& row : rows) {
    INFO(row.from << " -> " << (row.to ? row.to : "(removed)") << " flags " << row.flags);
    scene.refused.clear();
    int got = row.to
                  ? scene.mounted.decide_rename(scene.walk(row.from), scene.walk(row.to), row.flags)
                  : scene.mounted.decide(scene.walk(row.from), Change::remove);
    CHECK(got == row.expected);
    if (row.expected == EBUSY) {
      REQUIRE(scene.refused.size() == 1);
      CHECK(scene.refused[0].change == (row.to ? "rename" : "remove"));
    }
  }
}

}  // namespace

TEST_CASE("no mount point of the sandbox, and no folder above one, is moved or removed",
          "[workspace-judge]") {
  MountedScene scene;
  check_moves(scene, {
                         // a rename, either end
                         {"/ws/ref", "/ws/ref_old", 0, EBUSY},  // the mount point itself
                         {"/ws/dotfiles", "/ws/df", 0, EBUSY},  // a folder above one
                         {"/ws/dotfiles/bashrc", "/ws/dotfiles/old", 0, EBUSY},
                         {"/ws/plain", "/ws/dotfiles/bashrc", 0, EBUSY},  // a replacement
                         {"/ws/data.csv", "/ws/ref", 0, EBUSY},
                         {"/ws/plain", "/ws/ref", RENAME_NOREPLACE, EBUSY},
                         // an exchange, both ways
                         {"/ws/plain", "/ws/ref", RENAME_EXCHANGE, EBUSY},
                         {"/ws/ref", "/ws/plain", RENAME_EXCHANGE, EBUSY},
                         // a removal (unlink, rmdir, the morgue's move: all decide a removal)
                         {"/ws/dotfiles/bashrc", nullptr, 0, EBUSY},
                         {"/ws/ref", nullptr, 0, EBUSY},
                         {"/ws/dotfiles", nullptr, 0, EBUSY},
                         // the controls: beside and below a mount, nothing is held
                         {"/ws/dotfiles/other", "/ws/dotfiles/other2", 0, 0},
                         {"/ws/plain", "/ws/plain2", 0, 0},
                         {"/ws/plain", "/ws/course", RENAME_EXCHANGE, 0},
                         {"/ws/data.csv", nullptr, 0, 0},
                         {"/ws/dotfiles/other", nullptr, 0, 0},
                     });
  // A refusal for the name keeps its own errno, and is the only one recorded.
  scene.mounts = SandboxMounts(std::vector<Parts>{{"ws", "carrier"}, {"ws", ".git"}});
  check_moves(scene, {{"/ws/carrier", "/ws/carried", 0, EACCES},
                      {"/ws/.git", "/ws/git", 0, EACCES},
                      {"/ws/.git", nullptr, 0, EACCES}});
  // What cannot be read may hold a mount: refused.
  scene.readable = false;
  check_moves(scene, {{"/ws/plain", "/ws/plain2", 0, EBUSY}, {"/ws/data.csv", nullptr, 0, EBUSY}});
  CHECK(scene.refused.back().reason == "the sandbox's mounts could not be read");
  // Changes that move nothing do not ask for the list.
  scene.refused.clear();
  CHECK(scene.mounted.decide(scene.walk("/ws/data.csv"), Change::write) == 0);
  CHECK(scene.mounted.decide(scene.walk("/ws/new.txt"), Change::create) == 0);
  CHECK(scene.refused.empty());
}

TEST_CASE("no folder above the workspace is moved, whatever the mount list says",
          "[workspace-judge]") {
  // The workspace two levels under the private /tmp, as the red team's /tmp/X/ws: its own path
  // is held even with no list at all (degraded mode, where it is no mount).
  TempDir dir{"belljar-judge-above"};
  fs::create_directories(dir.path / "tmp/X/ws/venv");
  fs::create_directories(dir.path / "tmp/other");
  Fd root(::open(dir.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  WorkspaceRule rule{{}, {}, {}};
  Parts workspace{"tmp", "X", "ws"};
  std::vector<Parts> roots{workspace, {"tmp"}};
  std::vector<BrokerRefusal> refused;
  WorkspaceJudge judge{rule, workspace, roots, root.get(),
                       [&](BrokerRefusal r) { refused.push_back(r); }};
  SandboxPaths paths(root.get(), &holds_host_run_folder, workspace.size());  // as the broker
  auto walk = [&](const std::string& path) {
    WalkedPath at;
    REQUIRE(paths.walk(Parts{}, path, false, at) == 0);
    return at;
  };
  CHECK(judge.decide_rename(walk("/tmp/X"), walk("/tmp/X-moved"), 0) == EBUSY);
  CHECK(judge.decide_rename(walk("/tmp/other"), walk("/tmp/X"), RENAME_EXCHANGE) == EBUSY);
  CHECK(judge.decide(walk("/tmp/X"), Change::remove) == EBUSY);
  REQUIRE(refused.size() == 3);
  CHECK(refused[0].path == "/tmp/X");
  CHECK(refused[0].change == "rename");
  CHECK(refused[0].reason == "the workspace lies below it");
  CHECK(judge.decide_rename(walk("/tmp/other"), walk("/tmp/other2"), 0) == 0);
  CHECK(judge.decide_rename(walk("/tmp/X/ws"), walk("/tmp/ws"), 0) == EACCES);  // its own
}

TEST_CASE("degraded, a change through a link with a closed name is that name's",
          "[workspace-judge]") {
  // The host's links with protected names to ordinary places: strict mounts a guard over the
  // target; degraded mounts nothing, and the judge refuses by the link's own name.
  Scene scene;
  fs::create_directories(scene.ws / "dotfiles");
  touch(scene.ws / "dotfiles/zrc");
  fs::create_symlink("dotfiles/zrc", scene.ws / ".zshrc");
  fs::create_directory_symlink("plain", scene.ws / ".vscode");
  fs::create_directory_symlink("plain", scene.ws / "also-plain");
  WorkspaceJudge degraded = scene.judge_with(true, nullptr);
  struct LinkRow {
    const char* path;
    bool follow_last;
    Change change;
    int degraded;
  };
  for (const auto& row : std::initializer_list<LinkRow>{
           {"/ws/.zshrc", true, Change::write, EACCES},  // open('.zshrc', 'a')
           {"/ws/.zshrc", true, Change::mode, EPERM},
           {"/ws/.vscode/tasks.json", false, Change::create, EACCES},
           {"/ws/.vscode/deeper", false, Change::remove, EACCES},
           {"/ws/also-plain/x.txt", false, Change::create, 0},  // an ordinary link's name
           {"/ws/dotfiles/zrc", false, Change::write, 0},       // by its own name
       }) {
    INFO(row.path << " " << spelled(row.change));
    scene.refused.clear();
    CHECK(scene.judge.decide(scene.walk(row.path, row.follow_last), row.change) == 0);  // strict
    CHECK(degraded.decide(scene.walk(row.path, row.follow_last), row.change) == row.degraded);
    CHECK(scene.refused.size() == (row.degraded ? 1u : 0u));
  }
  scene.refused.clear();
  CHECK(degraded.decide(scene.walk("/ws/.zshrc", true), Change::write) == EACCES);
  REQUIRE(scene.refused.size() == 1);
  CHECK(scene.refused[0].path == ".zshrc");
}

TEST_CASE("the names on a protected link's way are closed, and no link stands on it",
          "[workspace-judge]") {
  // What the survey holds for .bashrc -> dotfiles/bashrc -> ../real/bashrc and .profile ->
  // d2/myprofile (not there yet), as the warden hands it to the broker.
  Scene scene;
  fs::create_directories(scene.ws / "dotfiles");
  fs::create_directories(scene.ws / "real");
  touch(scene.ws / "real/bashrc");
  fs::create_symlink("../real/bashrc", scene.ws / "dotfiles/bashrc");
  fs::create_directories(scene.ws / "d2");
  fs::create_directory_symlink("plain", scene.ws / "plainlink");
  fs::create_directories(scene.ws / "carrier2");
  fs::create_symlink("../plain", scene.ws / "carrier2/d3");
  HeldNames held;
  for (const char* name : {"dotfiles/bashrc", "real/bashrc", "d2/myprofile", "d3/sub/rc"})
    REQUIRE(held.hold(path_components(name), ".bashrc"));
  // .zshrc -> way/../zrc: `way` must stay a folder (no link there), though nothing is below it.
  REQUIRE(held.keep_way({"way"}, ".zshrc"));
  WorkspaceJudge judge = scene.judge_with(false, &held);
  for (const auto& row : std::initializer_list<Row>{
           {"/ws/real/bashrc", Change::write, EACCES},  // the end, by its own name
           {"/ws/real/bashrc", Change::times, EPERM},
           {"/ws/dotfiles/bashrc", Change::remove, EACCES},  // a link on the way
           {"/ws/d2/myprofile", Change::create, EACCES},     // an end not there yet
           {"/ws/d3", Change::make_folder, 0},               // a folder on the way
           {"/ws/real/other", Change::create, 0},            // beside the end
           {"/ws/data.csv", Change::write, 0},
       }) {
    INFO(row.path << " " << spelled(row.change));
    scene.refused.clear();
    CHECK(judge.decide(scene.walk(row.path), row.change) == row.expected);
    CHECK(scene.refused.size() == (row.expected ? 1u : 0u));
  }
  scene.refused.clear();
  CHECK(judge.decide(scene.walk("/ws/real/bashrc"), Change::write) == EACCES);
  REQUIRE(scene.refused.size() == 1);
  CHECK(scene.refused[0].reason == "on the way of the protected link .bashrc");

  for (const auto& row : std::initializer_list<RenameRow>{
           {"/ws/dotfiles/bashrc", "/ws/dotfiles/old", 0, EACCES},  // the middle link away
           {"/ws/data.csv", "/ws/d2/myprofile", 0, EACCES},         // onto an end
           {"/ws/real", "/ws/real2", 0, EACCES},                    // it carries the end away
           {"/ws/plainlink", "/ws/d2", 0, EACCES},                  // a link onto the way
           {"/ws/carrier2", "/ws/d3x", 0, 0},                       // a link off the way
           {"/ws/plain", "/ws/d3", 0, 0},                           // a folder, no link in it
           {"/ws/plain", "/ws/plain2", 0, 0},
       }) {
    INFO(row.from << " -> " << row.to);
    CHECK(judge.decide_rename(scene.walk(row.from), scene.walk(row.to), row.flags) == row.expected);
  }
  // A folder moved to d3 whose `sub` is a link: the way d3/sub/rc would go through it.
  fs::create_directories(scene.ws / "mover");
  fs::create_directory_symlink("../plain", scene.ws / "mover/sub");
  CHECK(judge.decide_rename(scene.walk("/ws/mover"), scene.walk("/ws/d3"), 0) == EACCES);
  // A folder on a way is not moved, even where its held name is not there yet (d2/myprofile).
  CHECK(judge.decide_rename(scene.walk("/ws/d2"), scene.walk("/ws/d2x"), 0) == EACCES);
  // Exchanged, each lands where the other stood: a plain folder for the link, the link lands
  // on d3's way.
  fs::create_directories(scene.ws / "d3");
  CHECK(judge.decide_rename(scene.walk("/ws/course"), scene.walk("/ws/plainlink"), 0) == 0);
  CHECK(judge.decide_rename(scene.walk("/ws/d3"), scene.walk("/ws/plainlink"), 0) == EACCES);
  CHECK(judge.decide_rename(scene.walk("/ws/plainlink"), scene.walk("/ws/course"),
                            RENAME_EXCHANGE) == 0);
  CHECK(judge.decide_rename(scene.walk("/ws/plainlink"), scene.walk("/ws/d3"), RENAME_EXCHANGE) ==
        EACCES);
  // A link made on the way, or at a held name; elsewhere as before.
  CHECK(judge.decide_link(scene.walk("/ws/d3"), "plain") == EACCES);
  CHECK(judge.decide_link(scene.walk("/ws/way"), "plain") == EACCES);
  CHECK(judge.decide(scene.walk("/ws/way"), Change::make_folder) == 0);
  CHECK(judge.decide_link(scene.walk("/ws/l1"), "proj") == 0);
  // Without the held names (the judge of the scene), the same changes are ordinary.
  CHECK(scene.judge.decide(scene.walk("/ws/real/bashrc"), Change::write) == 0);
  CHECK(scene.judge.decide_link(scene.walk("/ws/d3"), "plain") == 0);
}

TEST_CASE("a file with a second name is not changed through either", "[workspace-judge]") {
  // A hard link the host made: the other name may be a guarded one (.bashrc).
  Scene scene;
  REQUIRE(::link((scene.ws / ".bashrc").c_str(), (scene.ws / "proj/bashrc.bak").c_str()) == 0);
  check_rows(scene, {
                        {"/ws/proj/bashrc.bak", Change::write, EACCES},
                        {"/ws/proj/bashrc.bak", Change::mode, EPERM},
                        {"/ws/proj/bashrc.bak", Change::owner, EPERM},
                        {"/ws/proj/bashrc.bak", Change::times, EPERM},
                        {"/ws/proj/bashrc.bak", Change::remove, 0},  // a name goes, not the file
                        {"/ws/proj/notes.md", Change::write, 0},
                        {"/ws/proj", Change::mode, 0},  // a folder's links are its entries
                    });
  scene.refused.clear();
  CHECK(scene.judge.decide(scene.walk("/ws/proj/bashrc.bak"), Change::write) == EACCES);
  REQUIRE(scene.refused.size() == 1);
  CHECK(scene.refused[0].reason.find("another name (a hard link") != std::string::npos);
}

TEST_CASE("nothing inside a git repository by its shape (a bare one)", "[workspace-judge]") {
  Scene scene;
  for (const char* folder : {"remote.git/objects", "remote.git/refs/heads", "remote.git/hooks"})
    fs::create_directories(scene.ws / folder);
  touch(scene.ws / "remote.git/HEAD");
  check_rows(scene, {
                        {"/ws/remote.git/hooks/post-receive", Change::create, EACCES},
                        {"/ws/remote.git/config", Change::create, EACCES},
                        {"/ws/remote.gitx", Change::make_folder, 0},
                    });
  scene.refused.clear();
  CHECK(scene.judge.decide(scene.walk("/ws/remote.git/hooks/x"), Change::create) == EACCES);
  REQUIRE(scene.refused.size() == 1);
  CHECK(scene.refused[0].reason == "inside a git repository (the host's git runs its hooks)");
  // Without HEAD it is an ordinary folder.
  fs::remove(scene.ws / "remote.git/HEAD");
  CHECK(scene.judge.decide(scene.walk("/ws/remote.git/hooks/x"), Change::create) == 0);
  // A HEAD alone closes its folder: refs/ added beside a fixture's HEAD (git drops empty folders
  // from clones), a dangling HEAD link (core.preferSymlinkRefs) — the sixth outside pass.
  fs::create_directories(scene.ws / "fixture.git/objects");
  touch(scene.ws / "fixture.git/HEAD");
  CHECK(scene.judge.decide(scene.walk("/ws/fixture.git/refs"), Change::make_folder) == EACCES);
  CHECK(scene.judge.decide(scene.walk("/ws/fixture.git/config"), Change::create) == EACCES);
  fs::create_directories(scene.ws / "sym.git/objects");
  fs::create_symlink("refs/heads/unborn", scene.ws / "sym.git/HEAD");
  CHECK(scene.judge.decide(scene.walk("/ws/sym.git/config"), Change::create) == EACCES);
  // Inside a dot-path it is the dot rule's, which --writable opens: .git/logs holds the reflog's
  // HEAD, and `--writable .git` must let a commit append to it (the seventh outside pass found
  // it refused). Here the opened dot-path is .cache/myproject.
  fs::create_directories(scene.ws / ".cache/myproject/logs/refs/heads");
  touch(scene.ws / ".cache/myproject/logs/HEAD");
  CHECK(scene.judge.decide(scene.walk("/ws/.cache/myproject/logs/HEAD"), Change::write) == 0);
  CHECK(scene.judge.decide(scene.walk("/ws/.cache/myproject/logs/refs/heads/main"),
                           Change::create) == 0);
}
