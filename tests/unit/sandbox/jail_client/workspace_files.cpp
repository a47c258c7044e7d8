// The supervisor's own view of the workspace (workspace_files.hpp): what MCP's file tools list,
// read and write, on a real folder, with the jail's masks and read-only rules.
#include "sandbox/jail_client/workspace_files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using namespace belljar;
namespace fs = std::filesystem;

namespace {

struct Workspace {
  fs::path root;
  fs::path outside;
  Workspace() {
    char base[] = "/tmp/belljar-wsfiles-XXXXXX";
    fs::path top = ::mkdtemp(base);
    root = top / "ws";
    outside = top / "outside";
    fs::create_directories(root);
    fs::create_directories(outside);
  }
  ~Workspace() { fs::remove_all(root.parent_path()); }
  void put(const std::string& relative, const std::string& text) const {
    fs::create_directories((root / relative).parent_path());
    std::ofstream(root / relative) << text;
  }
  std::string content(const std::string& relative) const {
    std::ifstream in(root / relative);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  Policy policy() const {
    Policy policy;
    policy.workspace = root;
    return policy;
  }
};

std::string refusal_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const WorkspaceRefusal& refusal) {
    return refusal.what();
  }
  return "(no refusal)";
}

}  // namespace

TEST_CASE("workspace files: reads what the host holds, within bounds", "[workspace_files]") {
  Workspace ws;
  ws.put("notes/a.txt", "hello world");
  ws.put(".gitconfig", "[core]\n\tfsmonitor = touch /tmp/pwned\n");
  WorkspaceFiles files(ws.policy());
  WorkspaceRead read = files.read("notes/a.txt", 6, 100);
  CHECK(read.bytes == "world");
  CHECK(read.size == 11);
  CHECK_FALSE(read.truncated);
  CHECK(files.read("notes/a.txt", 0, 5).truncated);
  CHECK(files.read((ws.root / "notes/a.txt").string(), 0, 100).bytes == "hello world");
  CHECK(files.read(".gitconfig", 0, 1000).bytes.find("fsmonitor") != std::string::npos);
  CHECK(files.read("notes/a.txt", 0, 1ull << 40).bytes.size() == 11);  // capped, not allocated
}

TEST_CASE("workspace files: nothing outside the workspace is read or listed", "[workspace_files]") {
  Workspace ws;
  std::ofstream(ws.outside / "secret.txt") << "outside";
  fs::create_symlink(ws.outside / "secret.txt", ws.root / "abs-link");
  fs::create_symlink("../outside/secret.txt", ws.root / "rel-link");
  fs::create_symlink(ws.outside, ws.root / "dir-link");
  ws.put("in.txt", "inside");
  fs::create_symlink("in.txt", ws.root / "inner-link");
  WorkspaceFiles files(ws.policy());
  for (const char* path : {"../outside/secret.txt", "abs-link", "rel-link", "dir-link/secret.txt",
                           "/etc/hostname", "/proc/self/environ"}) {
    INFO(path);
    CHECK(refusal_of([&] { files.read(path, 0, 100); }).find("outside the workspace") !=
          std::string::npos);
  }
  CHECK(refusal_of([&] { files.list("dir-link", false); }).find("outside the workspace") !=
        std::string::npos);
  CHECK(files.read("inner-link", 0, 100).bytes == "inside");  // a link inside is the sandbox's too
}

TEST_CASE("workspace files: secrets are refused and listed as masked", "[workspace_files]") {
  Workspace ws;
  ws.put(".env", "API_TOKEN=hunter2");
  ws.put(".ssh/id_ed25519", "KEY");
  ws.put("notes.txt", "plain");
  fs::create_symlink("notes.txt", ws.root / ".env.local");  // a secret-named link: masked too
  fs::create_symlink(".env", ws.root / "env-link");         // a link to a secret: its target
  Policy policy = ws.policy();
  policy.hide = {"private"};
  ws.put("private/x.txt", "x");
  WorkspaceFiles files(policy);
  for (const char* path : {".env", ".ssh/id_ed25519", ".env.local", "env-link", "private/x.txt"}) {
    INFO(path);
    CHECK(refusal_of([&] { files.read(path, 0, 100); }).find("masked") != std::string::npos);
  }
  WorkspaceListing listing = files.list(".", true);
  std::map<std::string, WorkspaceEntry> by_path;
  for (auto& entry : listing.entries) by_path[entry.path] = entry;
  REQUIRE(by_path.count(".env"));
  CHECK(by_path[".env"].masked);
  CHECK_FALSE(by_path[".env"].size);  // not even its length
  CHECK(by_path[".ssh"].masked);
  CHECK_FALSE(by_path.count(".ssh/id_ed25519"));  // never entered
  CHECK(by_path["env-link"].kind == WorkspaceEntry::Kind::symlink);
  CHECK(by_path["env-link"].target == ".env");
  CHECK(by_path["notes.txt"].size == 5u);
  CHECK(refusal_of([&] { files.write(".env", "X=1", false, true); }).find("masked") !=
        std::string::npos);
  CHECK(ws.content(".env") == "API_TOKEN=hunter2");
}

TEST_CASE("workspace files: a FIFO is refused without waiting for a writer", "[workspace_files]") {
  Workspace ws;
  REQUIRE(::mkfifo((ws.root / "pipe").c_str(), 0600) == 0);
  WorkspaceFiles files(ws.policy());
  CHECK(refusal_of([&] { files.read("pipe", 0, 100); }).find("not a regular file") !=
        std::string::npos);
  CHECK(refusal_of([&] { files.write("pipe", "x", false, false); }) != "(no refusal)");
}

TEST_CASE("workspace files: writes stay beneath the root and off read-only paths",
          "[workspace_files]") {
  Workspace ws;
  fs::create_symlink(ws.outside, ws.root / "out");
  ws.put("target.txt", "t");
  fs::create_symlink("target.txt", ws.root / "final-link");
  ws.put(".git/config", "[core]\n");
  WorkspaceFiles files(ws.policy());
  WorkspaceWrite written = files.write("made/deep/new.txt", "abc", false, true);
  CHECK(written.path == "made/deep/new.txt");
  CHECK(written.size == 3);
  CHECK(ws.content("made/deep/new.txt") == "abc");
  CHECK(files.write("made/deep/new.txt", "de", true, true).size == 5);
  CHECK(files.write("made/./x/../y.txt", "y", false, true).path == "made/y.txt");
  CHECK(refusal_of([&] { files.write("nothere/z.txt", "z", false, false); }) != "(no refusal)");
  CHECK_FALSE(fs::exists(ws.root / "nothere"));
  for (const char* path : {"../escaped.txt", "out/escaped.txt", "/tmp/escaped.txt"}) {
    INFO(path);
    CHECK(refusal_of([&] { files.write(path, "no", false, true); }).find("outside the workspace") !=
          std::string::npos);
  }
  CHECK(fs::is_empty(ws.outside));
  CHECK(refusal_of([&] { files.write("final-link", "no", false, true); }).find("symlink") !=
        std::string::npos);
  CHECK(ws.content("target.txt") == "t");
  CHECK(refusal_of([&] {
          files.write(".git/config", "[core]\n\tfsmonitor = x\n", false, true);
        }).find("read-only") != std::string::npos);
  CHECK(refusal_of([&] { files.write(".git/hooks/pre-commit", "x", false, true); }) !=
        "(no refusal)");
  CHECK(ws.content(".git/config") == "[core]\n");
  CHECK_FALSE(fs::exists(ws.root / ".git/hooks"));
}

TEST_CASE("workspace files: the agent's writes obey the workspace rule", "[workspace_files]") {
  Workspace ws;
  ws.put("venv/pyvenv.cfg", "home = /usr/bin\n");
  WorkspaceFiles files(ws.policy());
  for (const char* path : {".gitconfig", ".local/bin/ls", "lib/python3.11/site-packages/x.pth",
                           "venv/lib/evil.py", "proj/.envrc"}) {
    INFO(path);
    CHECK(refusal_of([&] { files.write(path, "x", false, true); }) != "(no refusal)");
  }
  CHECK_FALSE(fs::exists(ws.root / ".gitconfig"));
  CHECK_FALSE(fs::exists(ws.root / ".local"));
  CHECK_FALSE(fs::exists(ws.root / "venv/lib"));
  CHECK(refusal_of([&] { files.write(".gitconfig", "x", false, true); }).find("a dot-path") !=
        std::string::npos);
  CHECK(files.write("proj/notes.txt", "ok", false, true).size == 2);
}
