// The supervisor's own view of the workspace for MCP's file tools (workspace_files.hpp).
#include "sandbox/jail_client/workspace_files.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include "sandbox/jail_client/jail_plan.hpp"
#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/path_parts.hpp"

namespace belljar {

namespace {

// Beneath the root, never through a magic link; symlinks inside the workspace resolve as they
// do in the sandbox, one that leaves it (absolute or by "..") is refused with EXDEV.
constexpr uint64_t kBeneath = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;

std::string errno_text(int error) {
  return std::strerror(error);
}

std::string fd_path(int fd) {
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  std::string target(4096, '\0');
  ssize_t n = ::readlink(link, target.data(), target.size());
  if (n < 0 || static_cast<size_t>(n) >= target.size())
    throw WorkspaceRefusal("the workspace's path could not be read back");
  target.resize(static_cast<size_t>(n));
  return target;
}

// The names a directory holds, sorted, at most `room` read (the rest: `cut`).
std::vector<std::string> names_in(int dir_fd, size_t room, bool& cut) {
  std::vector<std::string> names;
  int copy = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return names;
  DIR* dir = ::fdopendir(copy);
  if (!dir) {
    ::close(copy);
    return names;
  }
  while (const dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (names.size() >= room) {
      cut = true;
      break;
    }
    names.emplace_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::string joined(const std::string& parent, const std::string& name) {
  return parent == "." ? name : parent + "/" + name;
}

}  // namespace

std::string_view entry_kind_name(WorkspaceEntry::Kind kind) {
  switch (kind) {
    case WorkspaceEntry::Kind::file:
      return "file";
    case WorkspaceEntry::Kind::directory:
      return "directory";
    case WorkspaceEntry::Kind::symlink:
      return "symlink";
    case WorkspaceEntry::Kind::other:
      return "other";
    case WorkspaceEntry::Kind::unknown:
      break;
  }
  return "unknown";
}

WorkspaceFiles::WorkspaceFiles(const Policy& policy)
    : root_path_(policy.workspace.string()),
      hide_(default_hidden_patterns()),
      rule_(protected_patterns(policy), policy.writable) {
  hide_.insert(hide_.end(), policy.hide.begin(), policy.hide.end());
  std::tie(owner_uid_, owner_gid_) = sandbox_host_ids(policy);
  root_.reset(::open(root_path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_)
    throw WorkspaceRefusal("the workspace " + root_path_ +
                           " can't be opened: " + errno_text(errno));
}

std::string WorkspaceFiles::relative_request(const std::string& path) const {
  if (path.empty() || path.find('\0') != std::string::npos)
    throw WorkspaceRefusal("path must be a non-empty string");
  if (path[0] != '/') return path;
  // An absolute path names the workspace by the path the sandbox sees it at (its own); the
  // rest is opened beneath the root like any relative path.
  if (path_components(path) == path_components(root_path_)) return ".";
  if (auto below = path_below(path, root_path_)) return *below;
  throw WorkspaceRefusal(path + " is outside the workspace " + root_path_ + ": refused");
}

WorkspaceFiles::Opened WorkspaceFiles::open_beneath(const std::string& relative, uint64_t flags,
                                                    bool missing_ok) const {
  int fd = openat2_fd(root_.get(), relative, flags, kBeneath);
  if (fd < 0) {
    int error = errno;
    if (error == ENOENT && missing_ok) return {};
    if (error == EXDEV)
      throw WorkspaceRefusal(relative + " leads outside the workspace " + root_path_ + ": refused");
    throw WorkspaceRefusal(relative + ": " + errno_text(error));
  }
  Opened opened{Fd(fd), "."};
  std::string root = fd_path(root_.get()), real = fd_path(fd);
  if (real != root) {
    auto below = path_below(real, root);
    if (!below)  // cannot happen beneath the root; checked all the same
      throw WorkspaceRefusal(relative + " leads outside the workspace: refused");
    opened.relative = *below;
  }
  return opened;
}

namespace {

// A pattern covers what it matches and everything below it.
bool covered(const std::vector<std::string>& patterns, const std::string& relative) {
  std::string prefix;
  for (const auto& part : path_components(relative)) {
    prefix = prefix.empty() ? part : prefix + "/" + part;
    for (const auto& pattern : patterns)
      if (matches_hide_pattern(pattern, prefix)) return true;
  }
  return false;
}

}  // namespace

void WorkspaceFiles::give_to_sandbox(int dir_fd, const std::string& name) const {
  // A kernel run as root makes what the sandbox would have made: --sandbox-user's, so that
  // the session can change it later. Failing that, the file stays root's (the session can't
  // change it): said, not hidden.
  int flags = name.empty() ? AT_EMPTY_PATH : AT_SYMLINK_NOFOLLOW;
  if (::fchownat(dir_fd, name.c_str(), owner_uid_, owner_gid_, flags) != 0)
    throw WorkspaceRefusal("written, but its owner could not be set to the sandbox's (" +
                           std::to_string(owner_uid_) + "): " + errno_text(errno));
}

bool WorkspaceFiles::masked(const std::string& relative) const {
  return covered(hide_, relative);
}

std::optional<std::string> WorkspaceFiles::closed(const std::string& relative,
                                                  NameChange change) const {
  return rule_.refusal(path_components(relative), change);
}

void WorkspaceFiles::refuse_if_masked(const std::string& asked, const std::string& relative) const {
  // The name asked for counts too: the jail masks a secret-named symlink's target as well.
  if (masked(relative) || masked(asked))
    throw WorkspaceRefusal(asked + " is a secret file, masked inside the sandbox: refused");
}

WorkspaceListing WorkspaceFiles::list(const std::string& path, bool recursive) const {
  std::string asked = relative_request(path.empty() ? "." : path);
  Opened top = open_beneath(asked, O_RDONLY | O_DIRECTORY);
  refuse_if_masked(asked, top.relative);
  WorkspaceListing listing{top.relative, {}, false};
  struct Pending {
    Fd fd;
    std::string relative;
    size_t depth;
  };
  std::deque<Pending> pending;
  pending.push_back({std::move(top.fd), top.relative, 0});
  size_t scanned = 0;
  while (!pending.empty() && !listing.truncated) {
    Pending folder = std::move(pending.front());
    pending.pop_front();
    bool cut = false;
    auto names = names_in(folder.fd.get(), kMaxScanned - scanned, cut);
    scanned += names.size();
    if (cut) listing.truncated = true;
    for (const auto& name : names) {
      if (listing.entries.size() >= kMaxEntries) {
        listing.truncated = true;
        break;
      }
      WorkspaceEntry entry;
      entry.path = joined(folder.relative, name);
      entry.masked = masked(entry.path);
      struct stat info {};
      if (::fstatat(folder.fd.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(info.st_mode)) {
          entry.kind = WorkspaceEntry::Kind::symlink;
          std::string target(4096, '\0');
          ssize_t n = ::readlinkat(folder.fd.get(), name.c_str(), target.data(), target.size());
          if (n >= 0 && static_cast<size_t>(n) < target.size()) {
            target.resize(static_cast<size_t>(n));
            entry.target = std::move(target);
          }
        } else if (S_ISDIR(info.st_mode)) {
          entry.kind = WorkspaceEntry::Kind::directory;
        } else if (S_ISREG(info.st_mode)) {
          entry.kind = WorkspaceEntry::Kind::file;
          if (!entry.masked) entry.size = static_cast<uint64_t>(info.st_size);
        } else {
          entry.kind = WorkspaceEntry::Kind::other;
        }
      }
      bool enter = recursive && entry.kind == WorkspaceEntry::Kind::directory && !entry.masked &&
                   folder.depth + 1 < kMaxDepth;
      std::string relative = entry.path;
      listing.entries.push_back(std::move(entry));
      if (!enter) continue;
      int child =
          ::openat(folder.fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child >= 0) pending.push_back({Fd(child), relative, folder.depth + 1});
    }
  }
  return listing;
}

WorkspaceRead WorkspaceFiles::read(const std::string& path, uint64_t offset,
                                   uint64_t max_bytes) const {
  std::string asked = relative_request(path);
  // O_NONBLOCK: a FIFO the sandbox left there opens without waiting, and is refused below.
  Opened file = open_beneath(asked, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  refuse_if_masked(asked, file.relative);
  struct stat info {};
  if (::fstat(file.fd.get(), &info) != 0) throw WorkspaceRefusal(path + ": " + errno_text(errno));
  if (S_ISDIR(info.st_mode)) throw WorkspaceRefusal(path + " is a directory: use list_files");
  if (!S_ISREG(info.st_mode)) throw WorkspaceRefusal(path + " is not a regular file");
  WorkspaceRead result{file.relative, static_cast<uint64_t>(info.st_size), offset, {}, false};
  uint64_t want = std::min(max_bytes, kMaxReadBytes);
  if (offset < result.size)
    want = std::min(want, result.size - offset);
  else
    want = 0;
  result.bytes.resize(want);
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(file.fd.get(), result.bytes.data() + got, want - got,
                        static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw WorkspaceRefusal(path + ": " + errno_text(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  result.bytes.resize(got);
  result.truncated = offset + got < result.size;
  return result;
}

WorkspaceWrite WorkspaceFiles::write(const std::string& path, std::string_view data, bool append,
                                     bool create_dirs) const {
  std::string asked = relative_request(path);
  // ".." taken lexically: the walk below follows no symlink it could climb out of unseen.
  std::vector<std::string> parts;
  for (auto& part : path_components(asked)) {
    if (part != "..") {
      parts.push_back(std::move(part));
    } else if (parts.empty()) {
      throw WorkspaceRefusal(path + " leads outside the workspace " + root_path_ + ": refused");
    } else {
      parts.pop_back();
    }
  }
  if (parts.empty()) throw WorkspaceRefusal(path + " names no file in the workspace");
  std::string name = parts.back();
  parts.pop_back();
  // The folder, one prefix at a time beneath the root, made when asked.
  Opened folder{Fd(::dup(root_.get())), "."};
  if (!folder.fd) throw WorkspaceRefusal(path + ": " + errno_text(errno));
  std::string prefix = ".";
  // A Python environment by its shape (the rule's table): nothing below it is written.
  auto in_environment = [](int dir) { return holds_python_environment(dir); };
  bool environment = in_environment(folder.fd.get());
  for (const auto& part : parts) {
    prefix = joined(prefix, part);
    Opened next = open_beneath(prefix, O_PATH | O_DIRECTORY, create_dirs);
    if (!next.fd) {
      std::string made = joined(folder.relative, part);
      if (masked(made) || environment || closed(made, NameChange::make_folder))
        throw WorkspaceRefusal(path + ": " + made + " can't be made inside the sandbox");
      if (::mkdirat(folder.fd.get(), part.c_str(), 0755) == 0 && ::geteuid() == 0)
        give_to_sandbox(folder.fd.get(), part);
      next = open_beneath(prefix, O_PATH | O_DIRECTORY);
    }
    if (masked(next.relative)) throw WorkspaceRefusal(path + " is inside a masked secret: refused");
    folder = std::move(next);
    environment = environment || in_environment(folder.fd.get());
  }
  std::string relative = joined(folder.relative, name);
  if (masked(relative))
    throw WorkspaceRefusal(path + " is a secret file, masked inside the sandbox: refused");
  auto why = environment ? std::optional<std::string>("inside a Python environment")
                         : closed(relative, NameChange::other);
  if (why) throw WorkspaceRefusal(path + " is read-only inside the sandbox (" + *why + ")");
  int flags =
      O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (append ? O_APPEND : 0);
  bool existed = ::faccessat(folder.fd.get(), name.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0;
  Fd file(::openat(folder.fd.get(), name.c_str(), flags, 0644));
  if (!file) {
    int error = errno;
    if (error == ELOOP) throw WorkspaceRefusal(path + " is a symlink: refused");
    if (error == EISDIR) throw WorkspaceRefusal(path + " is a directory");
    throw WorkspaceRefusal(path + ": " + errno_text(error));
  }
  struct stat info {};
  if (::fstat(file.get(), &info) != 0 || !S_ISREG(info.st_mode))
    throw WorkspaceRefusal(path + " is not a regular file");
  // Truncated only once it is known to be a regular file (a FIFO is never opened for it).
  if (!append && ::ftruncate(file.get(), 0) != 0)
    throw WorkspaceRefusal(path + ": " + errno_text(errno));
  if (!existed && ::geteuid() == 0) give_to_sandbox(file.get(), "");
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(file.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw WorkspaceRefusal(path + ": " + errno_text(errno));
    done += static_cast<size_t>(n);
  }
  if (::fstat(file.get(), &info) != 0) throw WorkspaceRefusal(path + ": " + errno_text(errno));
  return {relative, done, static_cast<uint64_t>(info.st_size)};
}

}  // namespace belljar
