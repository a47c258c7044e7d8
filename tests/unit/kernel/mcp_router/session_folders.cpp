// Each session's own folder below the workspace: made fresh, never through a link, never a name
// that was there before.
#include "kernel/mcp_router/session_folders.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>

using namespace belljar;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path path;
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "belljar-folders-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~Scratch() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("a session's folder is made fresh below the workspace, its own alone",
          "[session_folders]") {
  Scratch workspace;
  SessionFolders folders(workspace.path, std::nullopt);
  std::string why;
  auto made = folders.make("0b9e6a1c-4c1d-4f6e-9a8b-2d3c4e5f6a7b", &why);
  REQUIRE(made);
  CHECK(*made == workspace.path / ".belljar-sessions" / "0b9e6a1c-4c1d-4f6e-9a8b-2d3c4e5f6a7b");
  CHECK_FALSE(folders.unusable());
  struct stat seen {};
  REQUIRE(::stat(made->c_str(), &seen) == 0);
  CHECK((seen.st_mode & 07777) == 0700);
  CHECK(seen.st_uid == ::geteuid());
  // The same id again: a name that exists was not made for this session.
  CHECK_FALSE(folders.make("0b9e6a1c-4c1d-4f6e-9a8b-2d3c4e5f6a7b", &why));
  CHECK(why.find("File exists") != std::string::npos);
  for (const char* bad : {"", "..", ".hidden", "a/b"}) {
    INFO(bad);
    CHECK_FALSE(folders.make(bad, &why));
  }
}

TEST_CASE("a sessions folder that is a link is refused, never followed", "[session_folders]") {
  Scratch workspace, elsewhere;
  fs::create_directory_symlink(elsewhere.path, workspace.path / ".belljar-sessions");
  SessionFolders folders(workspace.path, std::nullopt);
  REQUIRE(folders.unusable());  // said at start, before any session
  CHECK(folders.unusable()->find("not a folder of this user's") != std::string::npos);
  std::string why;
  CHECK_FALSE(folders.make("0b9e6a1c-4c1d-4f6e-9a8b-2d3c4e5f6a7b", &why));
  CHECK(why.find("not a link") != std::string::npos);
  CHECK(fs::is_empty(elsewhere.path));
}
