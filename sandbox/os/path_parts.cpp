#include "sandbox/os/path_parts.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

namespace belljar {

namespace {

// Deeper than this a tree is left in place: one descriptor per level is held on the way down.
constexpr int kMaxRemoveDepth = 512;

bool remove_below(int dir_fd, int depth) {
  DIR* dir = ::fdopendir(dir_fd);
  if (!dir) {
    ::close(dir_fd);
    return false;
  }
  std::vector<std::string> names;
  while (dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  bool all = true;
  for (const auto& name : names) {
    if (::unlinkat(::dirfd(dir), name.c_str(), 0) == 0 || errno == ENOENT) continue;
    if (errno != EISDIR && errno != EPERM) {
      all = false;
      continue;
    }
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int child = ::openat(::dirfd(dir), name.c_str(), flags);
    // A directory its owner made unreadable (chmod 000) is still theirs to remove.
    if (child < 0 && errno == EACCES &&
        ::fchmodat(::dirfd(dir), name.c_str(), 0700, AT_SYMLINK_NOFOLLOW) == 0)
      child = ::openat(::dirfd(dir), name.c_str(), flags);
    if (child < 0 || depth >= kMaxRemoveDepth) {
      if (child >= 0) ::close(child);
      all = false;
      continue;
    }
    all = remove_below(child, depth + 1) && all;
    if (::unlinkat(::dirfd(dir), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) all = false;
  }
  ::closedir(dir);
  return all;
}

}  // namespace

std::vector<std::string> path_components(std::string_view path) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= path.size()) {
    size_t end = path.find('/', at);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(at, end - at);
    if (!part.empty() && part != ".") parts.emplace_back(part);
    at = end + 1;
  }
  return parts;
}

std::optional<std::string> path_below(std::string_view path, std::string_view dir) {
  auto p = path_components(path), d = path_components(dir);
  if (p.size() <= d.size()) return std::nullopt;
  for (size_t i = 0; i < d.size(); ++i)
    if (p[i] != d[i]) return std::nullopt;
  std::string relative;
  for (size_t i = d.size(); i < p.size(); ++i) {
    if (p[i] == "..") return std::nullopt;
    relative += (relative.empty() ? "" : "/") + p[i];
  }
  return relative;
}

std::optional<std::string> canonical_path(const std::string& path) {
  char resolved[PATH_MAX];
  if (!::realpath(path.c_str(), resolved)) return std::nullopt;
  return std::string(resolved);
}

std::optional<std::string> descriptor_path(int fd) {
  char text[PATH_MAX];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), text, sizeof text);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof text || text[0] != '/') return std::nullopt;
  return std::string(text, static_cast<size_t>(n));
}

bool remove_tree(const std::string& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return true;
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  bool all = remove_below(fd, 1);
  return ::rmdir(path.c_str()) == 0 && all;
}

}  // namespace belljar
