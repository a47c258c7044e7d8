#include "kernel/mcp_router/session_folders.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sandbox/os/fd.hpp"

namespace belljar {

namespace {

// `name` below `parent`, made if missing, opened without following a link: a folder the server
// made, never a name something else planted there.
Fd folder_below(int parent, const std::string& name, mode_t mode, std::string* why) {
  if (::mkdirat(parent, name.c_str(), mode) != 0 && errno != EEXIST) {
    *why = name + ": " + std::strerror(errno);
    return Fd();
  }
  Fd folder(::openat(parent, name.c_str(), O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_RDONLY));
  if (!folder) *why = name + ": " + std::strerror(errno) + " (it must be a folder, not a link)";
  return folder;
}

}  // namespace

SessionFolders::SessionFolders(std::filesystem::path workspace,
                               std::optional<std::pair<uid_t, gid_t>> owner)
    : workspace_(std::move(workspace)), owner_(owner) {}

std::optional<std::filesystem::path> SessionFolders::make(const std::string& kernel_id,
                                                          std::string* why) const {
  if (kernel_id.empty() || kernel_id.find('/') != std::string::npos || kernel_id[0] == '.') {
    *why = "not a kernel id: " + kernel_id;
    return std::nullopt;
  }
  Fd workspace(::open(workspace_.c_str(), O_DIRECTORY | O_CLOEXEC | O_RDONLY));
  if (!workspace) {
    *why = workspace_.string() + ": " + std::strerror(errno);
    return std::nullopt;
  }
  Fd sessions = folder_below(workspace.get(), kRoot, 0755, why);
  if (!sessions) return std::nullopt;
  // A fresh id names a fresh folder: one that exists already was not made for this session.
  if (::mkdirat(sessions.get(), kernel_id.c_str(), 0700) != 0) {
    *why = std::string(kRoot) + "/" + kernel_id + ": " + std::strerror(errno);
    return std::nullopt;
  }
  if (owner_ && ::fchownat(sessions.get(), kernel_id.c_str(), owner_->first, owner_->second,
                           AT_SYMLINK_NOFOLLOW) != 0) {
    *why = std::string(kRoot) + "/" + kernel_id + ": chown: " + std::strerror(errno);
    return std::nullopt;
  }
  return workspace_ / kRoot / kernel_id;
}

std::optional<std::string> SessionFolders::unusable() const {
  std::filesystem::path root = workspace_ / kRoot;
  struct stat seen {};
  if (::lstat(root.c_str(), &seen) != 0)
    return errno == ENOENT
               ? std::nullopt
               : std::optional<std::string>(root.string() + ": " + std::strerror(errno));
  if (!S_ISDIR(seen.st_mode) || seen.st_uid != ::geteuid())
    return root.string() + " is not a folder of this user's (a link, a file, or someone else's): " +
           "remove it, or give another --workspace";
  return std::nullopt;
}

}  // namespace belljar
