#include "sandbox/jail/sandbox_paths.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <deque>

#include "sandbox/os/path_parts.hpp"

namespace belljar {

namespace {

#ifndef STATX_MNT_ID
constexpr unsigned kStatxMountId = 0x1000U;
#else
constexpr unsigned kStatxMountId = STATX_MNT_ID;
#endif

Fd open_beneath(int dir, const std::string& name) {
  return Fd(::openat(dir, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
}

Fd duplicate(int fd) {
  return Fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
}

// The text of the symlink `link` (an O_PATH descriptor of it); false with errno set.
bool link_text(int link, std::string& text) {
  char buf[kMaxPathBytes];
  ssize_t n = ::readlinkat(link, "", buf, sizeof buf);
  if (n < 0) return false;
  if (static_cast<size_t>(n) >= sizeof buf) {
    errno = ENAMETOOLONG;
    return false;
  }
  text.assign(buf, static_cast<size_t>(n));
  return true;
}

bool on_procfs(int fd) {
  struct statfs fs {};
  return ::fstatfs(fd, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

}  // namespace

bool object_id(int fd, ObjectId& id) {
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_INO | kStatxMountId, &sx) != 0)
    return false;
  id.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  id.ino = sx.stx_ino;
  id.mount = (sx.stx_mask & kStatxMountId) ? sx.stx_mnt_id : 0;
  return true;
}

int SandboxPaths::walk(const std::vector<std::string>& start, std::string_view path,
                       bool follow_last, WalkedPath& out) const {
  if (path.empty()) return ENOENT;
  if (path[0] == '/' || start.empty()) return walk(WalkStart{}, path, follow_last, out);
  std::string joined;
  for (const auto& part : start) joined += "/" + part;
  joined += "/";
  joined += path;
  return walk(WalkStart{}, joined, follow_last, out);
}

int SandboxPaths::walk(const WalkStart& start, std::string_view path, bool follow_last,
                       WalkedPath& out) const {
  out.seen = WalkedPath::Seen::unseen;
  out.links.clear();
  if (path.empty()) return ENOENT;
  if (path.size() >= kMaxPathBytes) return ENAMETOOLONG;
  // One descriptor at a time, not one per level: a tree deeper than the warden's descriptor
  // limit is still walked. ".." opens the parent again; the broker is the only one renaming
  // in the sandbox, one call at a time, so the parent it opens is the one the walk came from.
  Fd at;
  std::vector<std::string> where;
  std::vector<bool> marked;  // per folder on the way, root first: it holds the marker
  auto enter = [&](Fd dir) {
    marked.push_back(holds_marker(dir.get(), marked.size()));
    at = std::move(dir);
  };
  auto to_root = [&] {
    where.clear();
    marked.clear();
    enter(duplicate(root_));
  };
  if (path[0] != '/' && start.dir) {
    at = duplicate(start.dir.get());
    where = start.where;
    marked = start.marked;
    if (marked.size() != where.size() + 1) return EINVAL;
  } else {
    to_root();
  }
  if (!at) return errno;

  std::deque<std::string> todo;
  for (auto& part : path_components(path)) todo.push_back(std::move(part));
  out.trailing_slash = path.size() > 1 && path.back() == '/';
  {
    std::string_view trimmed = path;
    while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.remove_suffix(1);
    auto slash = trimmed.rfind('/');
    std::string_view last = slash == std::string_view::npos ? trimmed : trimmed.substr(slash + 1);
    out.dots_last = last == "." || last == "..";
  }
  auto up = [&]() -> int {
    Fd parent(::openat(at.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!parent) return errno;
    at = std::move(parent);
    where.pop_back();
    marked.pop_back();
    return 0;
  };
  int links = 0;
  std::string name;  // "" when the path ends at the folder `at`
  while (!todo.empty()) {
    std::string part = std::move(todo.front());
    todo.pop_front();
    if (part == "..") {
      if (!where.empty())
        if (int error = up()) return error;
      continue;
    }
    bool last = todo.empty();
    Fd next = open_beneath(at.get(), part);
    if (!next) {
      if (last && errno == ENOENT) {
        name = part;  // a name to be made
        out.seen = WalkedPath::Seen::absent;
        break;
      }
      return errno;
    }
    struct stat st {};
    if (::fstat(next.get(), &st) != 0) return errno;
    if (S_ISLNK(st.st_mode) && (!last || follow_last || out.trailing_slash)) {
      if (on_procfs(next.get())) {
        out.where = std::move(where);
        out.name = std::move(part);
        out.rest_after_magic.assign(todo.begin(), todo.end());
        return EXDEV;
      }
      if (++links > kMaxSymlinks) return ELOOP;
      out.links.push_back(where);
      out.links.back().push_back(part);
      std::string text;
      if (!link_text(next.get(), text)) return errno;
      if (text.empty()) return ENOENT;
      auto parts = path_components(text);
      todo.insert(todo.begin(), parts.begin(), parts.end());
      if (text[0] == '/') to_root();
      if (!at) return errno;
      if (todo.empty()) break;  // a link to "/"
      continue;
    }
    if (last || !S_ISDIR(st.st_mode)) {
      if (!last) return ENOTDIR;
      name = part;  // a file, or a folder still named from its parent
      out.seen = WalkedPath::Seen::there;
      out.seen_stat = st;
      break;
    }
    where.push_back(std::move(part));
    enter(std::move(next));
  }
  if (name.empty() && !where.empty()) {
    // The path ended at a folder ("a/..", "."): named from its parent like any other.
    name = where.back();
    if (int error = up()) return error;
  }
  out.name = name;
  out.parent = std::move(at);
  out.where = std::move(where);
  out.marked = std::move(marked);
  return 0;
}

bool SandboxPaths::holds_marker(int dir, size_t depth) const {
  return marks_ && depth >= marks_from_ && marks_(dir);
}

bool SandboxPaths::locate(int dir, std::vector<std::string>& where) const {
  WalkStart start;
  if (!locate(dir, start)) return false;
  where = std::move(start.where);
  return true;
}

bool SandboxPaths::locate(int dir, WalkStart& start) const {
  std::string text;
  char buf[kMaxPathBytes];
  std::string self = "/proc/self/fd/" + std::to_string(dir);
  ssize_t n = ::readlink(self.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf || buf[0] != '/') return false;
  text.assign(buf, static_cast<size_t>(n));
  auto parts = path_components(text);
  Fd at = duplicate(root_);
  std::vector<bool> marked = {at && holds_marker(at.get(), 0)};
  for (const auto& part : parts) {
    if (part == ".." || !at) return false;
    at = open_beneath(at.get(), part);
    struct stat st {};
    if (!at || ::fstat(at.get(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    marked.push_back(holds_marker(at.get(), marked.size()));
  }
  ObjectId found, wanted;
  if (!at || !object_id(at.get(), found) || !object_id(dir, wanted)) return false;
  if (found == wanted) {
    start.dir = duplicate(dir);
  } else if (found.dev == wanted.dev && found.ino == wanted.ino) {
    // The same folder, seen through a mount stacked on it since the caller went in: a guard a
    // survey mounted over a .git the host made, or moved the folder to. The sandbox can't
    // mount, so the path's view is the newer one: the folder is located where it is now and
    // seen as the path shows it, and what that mount refuses (read-only) is refused.
    start.dir = std::move(at);
  } else {
    return false;
  }
  start.where = std::move(parts);
  start.marked = std::move(marked);
  return static_cast<bool>(start.dir);
}

}  // namespace belljar
