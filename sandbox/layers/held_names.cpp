#include "sandbox/layers/held_names.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <deque>

#include "sandbox/os/fd.hpp"
#include "sandbox/os/path_parts.hpp"

namespace belljar {

namespace {

std::string absolute(const std::vector<std::string>& parts) {
  std::string text;
  for (const auto& part : parts) text += "/" + part;
  return text.empty() ? "/" : text;
}

// Whether `path` starts with all of `prefix`.
bool starts_with(const std::vector<std::string>& path, const std::vector<std::string>& prefix) {
  if (prefix.size() > path.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (path[i] != prefix[i]) return false;
  return true;
}

}  // namespace

LinkWay follow_link_way(const std::string& path) {
  LinkWay way;
  std::vector<std::string> done;  // resolved: no link among them
  auto parts = path_components(path);
  std::deque<std::string> todo(parts.begin(), parts.end());
  bool missing = false;  // from here on the rest is taken as written
  int hops = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.front());
    todo.pop_front();
    if (part == "..") {
      if (!done.empty()) {
        way.left.push_back(absolute(done));
        done.pop_back();
      }
      continue;
    }
    done.push_back(part);
    if (missing) continue;
    std::string here = absolute(done);
    struct stat st {};
    if (::lstat(here.c_str(), &st) != 0) {
      missing = true;  // ENOENT, ENOTDIR, or what cannot be looked at: not there to follow
      continue;
    }
    if (!S_ISLNK(st.st_mode)) continue;
    way.links.push_back(here);
    if (++hops > kMaxLinkHops) {
      way.loops = true;
      return way;
    }
    std::string text(static_cast<size_t>(st.st_size > 0 ? st.st_size : 0) + 1, '\0');
    ssize_t n = ::readlink(here.c_str(), text.data(), text.size());
    done.pop_back();
    if (n <= 0 || static_cast<size_t>(n) >= text.size()) {
      // Changed or unreadable since the lstat: the way is not known past here.
      way.loops = true;
      return way;
    }
    text.resize(static_cast<size_t>(n));
    if (text[0] == '/') done.clear();
    auto target = path_components(text);
    todo.insert(todo.begin(), target.begin(), target.end());
  }
  way.end = absolute(done);
  return way;
}

namespace {

bool add_once(std::vector<HeldName>& list, std::set<NameParts>& seen, NameParts relative,
              const std::string& link, size_t total) {
  if (seen.count(relative)) return true;
  if (total >= kMaxHeldNames) return false;
  seen.insert(relative);
  list.push_back({std::move(relative), link});
  return true;
}

}  // namespace

bool HeldNames::hold(NameParts relative, const std::string& link) {
  return add_once(names_, seen_names_, std::move(relative), link, size());
}

bool HeldNames::keep_way(NameParts relative, const std::string& link) {
  return add_once(ways_, seen_ways_, std::move(relative), link, size());
}

const HeldName* HeldNames::holding(const NameParts& relative) const {
  for (const auto& name : names_)
    if (starts_with(relative, name.path)) return &name;
  return nullptr;
}

std::vector<const HeldName*> HeldNames::beyond(const NameParts& relative) const {
  std::vector<const HeldName*> found;
  for (const auto& name : names_)
    if (name.path.size() > relative.size() && starts_with(name.path, relative))
      found.push_back(&name);
  for (const auto& way : ways_)
    if (starts_with(way.path, relative)) found.push_back(&way);
  return found;
}

// --- what a survey finds ---

namespace {

constexpr size_t kMaxFollowed = 8 * kMaxHeldNames;  // ways followed in one survey
constexpr size_t kMaxScanDepth = 128;
constexpr size_t kMaxGitFile = 64 << 10;  // a .git file or a git config, read this far
constexpr int kMaxIncludes = 10;          // git's own include depth

std::string joined(const NameParts& parts) {
  std::string text;
  for (const auto& part : parts) text += (text.empty() ? "" : "/") + part;
  return text;
}

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
}

std::string trimmed(std::string text) {
  auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

std::string lower(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::optional<std::string> read_small(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string text(kMaxGitFile, '\0');
  ssize_t n = ::read(fd.get(), text.data(), text.size());
  if (n < 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  return text;
}

// The values git reads as paths in a config file's text: core.hooksPath (where hooks run
// from) and include.path / includeIf.*.path (more config). Sections and keys are
// case-insensitive; a value may be quoted; comments start with # or ;.
struct GitConfigPaths {
  std::vector<std::string> hooks, includes;
};
GitConfigPaths git_config_paths(const std::string& text) {
  GitConfigPaths paths;
  std::string section;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = trimmed(text.substr(at, end - at));
    at = end + 1;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      auto close = line.find(']');
      std::string head =
          lower(trimmed(line.substr(1, (close == std::string::npos ? line.size() : close) - 1)));
      section = head.substr(0, head.find_first_of(" \t\"."));
      continue;
    }
    auto equals = line.find('=');
    if (equals == std::string::npos) continue;
    std::string key = lower(trimmed(line.substr(0, equals)));
    std::string value = trimmed(line.substr(equals + 1));
    if (value.size() >= 2 && value.front() == '"') {
      auto quote = value.find('"', 1);
      value = value.substr(1, quote == std::string::npos ? std::string::npos : quote - 1);
    } else {
      value = trimmed(value.substr(0, value.find_first_of("#;")));
    }
    if (value.empty()) continue;
    if (section == "core" && key == "hookspath") paths.hooks.push_back(value);
    if ((section == "include" || section == "includeif") && key == "path")
      paths.includes.push_back(value);
  }
  return paths;
}

}  // namespace

void ProtectedLinks::folder(dev_t dev, ino_t ino, NameParts relative) {
  folders_.emplace(std::make_pair(dev, ino), std::move(relative));
}

std::string ProtectedLinks::host_path(const NameParts& relative) const {
  return relative.empty() ? workspace_ : workspace_ + "/" + joined(relative);
}

void ProtectedLinks::link(const NameParts& relative, std::optional<int> guard,
                          const std::string& reason) {
  pending_.push_back({host_path(relative), joined(relative), guard, reason});
}

void ProtectedLinks::pointer(const std::string& base, const std::string& text,
                             const NameParts& from) {
  // "~" is the host user's home, outside what the sandbox may change unless the workspace is
  // that home: left to the dot-name rule there.
  if (text.empty() || text[0] == '~') return;
  std::string path = text[0] == '/' ? text : base + "/" + text;
  pending_.push_back({path, joined(from), std::nullopt, "git follows it"});
}

void ProtectedLinks::git(const NameParts& relative) {
  std::string at = host_path(relative);
  std::string worktree = parent_of(at);
  struct stat st {};
  if (::lstat(at.c_str(), &st) != 0) return;
  std::string git_dir = at;
  if (S_ISREG(st.st_mode)) {
    // A worktree's or a submodule's `.git` file: "gitdir: PATH", relative to its folder.
    auto text = read_small(at);
    if (!text || text->rfind("gitdir:", 0) != 0) return;
    std::string target = trimmed(text->substr(7, text->find('\n') - 7));
    pointer(worktree, target, relative);
    git_dir = target.empty() || target[0] == '/' ? target : worktree + "/" + target;
  } else if (!S_ISDIR(st.st_mode)) {
    return;
  }
  // The config, and what it includes (git's own depth), each file held where it lies.
  std::vector<std::string> configs = {git_dir + "/config"};
  for (int depth = 0; depth < kMaxIncludes && !configs.empty(); ++depth) {
    std::vector<std::string> next;
    for (const auto& config : configs) {
      auto text = read_small(config);
      if (!text) continue;
      GitConfigPaths paths = git_config_paths(*text);
      for (const auto& hooks : paths.hooks) pointer(worktree, hooks, relative);
      for (const auto& include : paths.includes) {
        pointer(parent_of(config), include, relative);
        if (include[0] != '~')
          next.push_back(include[0] == '/' ? include : parent_of(config) + "/" + include);
      }
    }
    configs = std::move(next);
  }
}

std::optional<NameParts> ProtectedLinks::relative_of(const std::string& path) const {
  // By identity first: the deepest folder on the path that exists, as the walk knew it.
  auto parts = path_components(path);
  for (size_t keep = parts.size() + 1; keep-- > 0;) {
    NameParts prefix(parts.begin(), parts.begin() + static_cast<long>(keep));
    std::string text = "/" + joined(prefix);
    struct stat st {};
    // lstat: a link on the path (its own name, or one made since) is a name, not its target.
    if (::lstat(text.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    auto known = folders_.find({st.st_dev, st.st_ino});
    if (known == folders_.end()) break;
    NameParts relative = known->second;
    relative.insert(relative.end(), parts.begin() + static_cast<long>(keep), parts.end());
    return relative;
  }
  // Else by its text (a folder below a guarded one, which the walk does not enter).
  auto workspace = path_components(workspace_);
  if (!starts_with(parts, workspace)) return std::nullopt;
  return NameParts(parts.begin() + static_cast<long>(workspace.size()), parts.end());
}

void ProtectedLinks::links_in(const std::string& folder, const NameParts& relative,
                              const Pending& from, size_t depth) {
  if (depth >= kMaxScanDepth) return;
  Fd fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  DIR* dir = fd ? ::fdopendir(fd.get()) : nullptr;
  if (!dir) return;  // what the host's user cannot read, their tools cannot follow either
  fd.release();
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    unsigned char type = entry->d_type;
    if (type == DT_UNKNOWN) {
      struct stat st {};
      if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_REG;
    }
    NameParts inner = relative;
    inner.push_back(name);
    if (type == DT_LNK)
      pending_.push_back({folder + "/" + name, from.link, from.guard, from.reason});
    else if (type == DT_DIR)
      links_in(folder + "/" + name, inner, from, depth + 1);
  }
  ::closedir(dir);
}

void ProtectedLinks::inside(const NameParts& relative, std::optional<int> guard,
                            const std::string& reason) {
  Pending from{host_path(relative), joined(relative), guard, reason};
  links_in(from.path, relative, from, relative.size());
}

bool ProtectedLinks::resolve(HeldNames& held, std::vector<End>& ends) {
  bool bounded = true;
  for (size_t next = 0; next < pending_.size(); ++next) {
    if (next >= kMaxFollowed) return false;
    Pending item = pending_[next];  // links_in may grow the list
    LinkWay way = follow_link_way(item.path);
    for (const auto& passed : way.links)
      if (auto relative = relative_of(passed); relative && worth_holding(*relative))
        bounded = held.hold(*relative, item.link) && bounded;
    for (const auto& left : way.left)
      if (auto relative = relative_of(left); relative && worth_holding(*relative))
        bounded = held.keep_way(*relative, item.link) && bounded;
    if (!way.end) continue;
    auto relative = relative_of(*way.end);
    if (!relative) continue;
    if (worth_holding(*relative)) bounded = held.hold(*relative, item.link) && bounded;
    struct stat st {};
    if (::stat(way.end->c_str(), &st) != 0) continue;
    if (item.guard && !relative->empty())
      ends.push_back({*relative, S_ISDIR(st.st_mode), *item.guard, item.reason});
    // A folder the way ends at: a host tool reads what is in it, and follows its links too.
    if (S_ISDIR(st.st_mode) && scanned_.insert({st.st_dev, st.st_ino}).second)
      links_in(*way.end, *relative, item, relative->size());
    if (!bounded) return false;
  }
  return bounded;
}

namespace {

// Whether something holds the file open for writing: a read lease is refused (EAGAIN) while
// any writer exists, a shared writable mapping included. What cannot be asked is not known.
bool open_for_writing(int dir, const std::string& name) {
  Fd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (::fcntl(fd.get(), F_SETLEASE, F_RDLCK) == 0) {
    ::fcntl(fd.get(), F_SETLEASE, F_UNLCK);
    return false;
  }
  return errno == EAGAIN;
}

void writers_in(int dir, const NameParts& relative, OpenWriters& out, size_t& checked,
                size_t depth) {
  Fd copy(::fcntl(dir, F_DUPFD_CLOEXEC, 0));
  DIR* stream = copy ? ::fdopendir(copy.get()) : nullptr;
  if (!stream) return;
  copy.release();
  while (dirent* entry = ::readdir(stream)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (++checked > kMaxWriterChecks) {
      out.too_many = true;
      break;
    }
    NameParts inner = relative;
    inner.push_back(name);
    if (entry->d_type == DT_DIR && depth < kMaxScanDepth) {
      Fd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub) writers_in(sub.get(), inner, out, checked, depth + 1);
    } else if (entry->d_type == DT_REG || entry->d_type == DT_UNKNOWN) {
      if (open_for_writing(dir, name)) out.paths.push_back(joined(inner));
    }
  }
  ::closedir(stream);
}

}  // namespace

OpenWriters newly_held_writers(const HeldNames& before, const HeldNames& now,
                               const std::string& workspace) {
  OpenWriters out;
  size_t checked = 0;
  for (const auto& name : now.names()) {
    if (name.path.empty() || before.holding(name.path)) continue;  // all of it, or held already
    std::string parent = workspace;
    for (size_t i = 0; i + 1 < name.path.size(); ++i) parent += "/" + name.path[i];
    Fd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!dir || ::fstatat(dir.get(), name.path.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    if (S_ISDIR(st.st_mode)) {
      Fd inside(::openat(dir.get(), name.path.back().c_str(),
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (inside) writers_in(inside.get(), name.path, out, checked, name.path.size());
    } else if (++checked > kMaxWriterChecks) {
      out.too_many = true;
    } else if (open_for_writing(dir.get(), name.path.back())) {
      out.paths.push_back(joined(name.path));
    }
    if (out.too_many) break;
  }
  return out;
}

}  // namespace belljar
