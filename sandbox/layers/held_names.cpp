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
    if (done.front() == "proc") {
      way.unknown = true;  // /proc/self/cwd, /proc/self/root: the follower's, not ours
      return way;
    }
    if (++hops > kMaxLinkHops) {
      way.loops = true;
      return way;
    }
    // PATH_MAX, whatever st_size says (0 for some filesystems' links).
    std::string text(4096, '\0');
    ssize_t n = ::readlink(here.c_str(), text.data(), text.size());
    done.pop_back();
    if (n <= 0 || static_cast<size_t>(n) >= text.size()) {
      way.unknown = true;  // changed or unreadable since the lstat: not known past here
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

bool HeldNames::add(std::deque<HeldName>& list, NameParts relative, const std::string& link,
                    bool is_way) {
  auto& index = is_way ? way_at_ : held_at_;
  if (index.count(relative)) return true;
  if (size() >= kMaxHeldNames) return false;
  list.push_back({std::move(relative), link});
  const HeldName* added = &list.back();
  index.emplace(added->path, added);
  // The folders it stands below (a way kept: and itself) are on its way.
  size_t depth = added->path.size() + (is_way ? 1 : 0);
  for (size_t k = 0; k < depth && k <= added->path.size(); ++k)
    through_.emplace(NameParts(added->path.begin(), added->path.begin() + static_cast<long>(k)),
                     added);
  return true;
}

bool HeldNames::hold(NameParts relative, const std::string& link) {
  return add(names_, std::move(relative), link, false);
}

bool HeldNames::keep_way(NameParts relative, const std::string& link) {
  return add(ways_, std::move(relative), link, true);
}

const HeldName* HeldNames::holding(const NameParts& relative) const {
  NameParts prefix;
  for (size_t k = 0;; ++k) {
    if (auto found = held_at_.find(prefix); found != held_at_.end()) return found->second;
    if (k == relative.size()) return nullptr;
    prefix.push_back(relative[k]);
  }
}

const HeldName* HeldNames::first_beyond(const NameParts& relative) const {
  auto found = through_.find(relative);
  return found == through_.end() ? nullptr : found->second;
}

std::vector<const HeldName*> HeldNames::beyond(const NameParts& relative) const {
  std::vector<const HeldName*> found;
  if (!first_beyond(relative)) return found;
  for (const auto& name : names_)
    if (name.path.size() > relative.size() && starts_with(name.path, relative))
      found.push_back(&name);
  for (const auto& way : ways_)
    if (starts_with(way.path, relative)) found.push_back(&way);
  return found;
}

// --- what a survey finds ---

namespace {

constexpr size_t kMaxFollowed = 32768;  // ways followed in one survey
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
  std::vector<std::string> commands;  // values git runs as commands (core.fsmonitor, ...)
};

// The keys whose values git runs as a command line, by section (and, for a `section.NAME.key`
// one, its last part): a word of it that names a path names a file git runs.
bool runs_a_command(const std::string& section, const std::string& key) {
  static const std::set<std::pair<std::string, std::string>> keys = {
      {"core", "fsmonitor"},
      {"core", "pager"},
      {"core", "editor"},
      {"core", "sshcommand"},
      {"core", "askpass"},
      {"sequence", "editor"},
      {"diff", "external"},
      {"diff", "command"},
      {"diff", "textconv"},
      {"merge", "driver"},
      {"filter", "clean"},
      {"filter", "smudge"},
      {"filter", "process"},
      {"gpg", "program"},
      {"credential", "helper"},
      {"interactive", "difffilter"},
      {"uploadpack", "packobjectshook"}};
  return keys.count({section, key}) > 0 || section == "alias" || section == "pager";
}
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
    if (runs_a_command(section, key)) paths.commands.push_back(value);
    if ((section == "include" || section == "includeif") && key == "path")
      paths.includes.push_back(value);
  }
  return paths;
}

// The words of a command line that name a path (hold a "/"), quotes and an alias's "!" dropped:
// what a shell would run or read by that name from the command's folder.
std::vector<std::string> command_paths(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (word.find('/') != std::string::npos) words.push_back(word);
    word.clear();
  };
  for (char c : command) {
    if (c == ' ' || c == '\t' || c == ';' || c == '&' || c == '|') {
      flush();
    } else if (c != '"' && c != '\'' && !(c == '!' && word.empty())) {
      word += c;
    }
  }
  flush();
  return words;
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
  // A "~" still there (expand_home) is a home elsewhere, outside what the sandbox may change.
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
  std::vector<std::string> configs = {git_dir + "/config", git_dir + "/config.worktree"};
  // A worktree's gitdir names the repository it shares (hooks, config) in `commondir`.
  if (auto common = read_small(git_dir + "/commondir")) {
    std::string path = trimmed(common->substr(0, common->find('\n')));
    if (!path.empty()) {
      pointer(git_dir, path, relative);
      configs.push_back((path[0] == '/' ? path : git_dir + "/" + path) + "/config");
    }
  }
  config_pointers(configs, worktree, relative);
}

void ProtectedLinks::git_config(const NameParts& relative) {
  // The user's own config (the workspace is their home): relative hooks and commands name a
  // path in each repository, left to the repositories' own survey.
  config_pointers({host_path(relative)}, "", relative);
}

void ProtectedLinks::config_pointers(std::vector<std::string> configs, const std::string& worktree,
                                     const NameParts& from) {
  // Each config, and what it includes (git's own depth), each file held where it lies.
  for (int depth = 0; depth < kMaxIncludes && !configs.empty(); ++depth) {
    std::vector<std::string> next;
    for (const auto& config : configs) {
      auto text = read_small(config);
      if (!text) continue;
      GitConfigPaths paths = git_config_paths(*text);
      auto named = [&](const std::string& path, const std::string& base) {
        std::string full = expand_home(path);
        if (full[0] == '/' || !base.empty()) pointer(base, full, from);
      };
      for (const auto& hooks : paths.hooks) named(hooks, worktree);
      // A command runs in the worktree's top: each of its words that names a path.
      for (const auto& command : paths.commands)
        for (const auto& word : command_paths(command)) named(word, worktree);
      for (const auto& include : paths.includes) {
        std::string full = expand_home(include);
        named(full, parent_of(config));
        if (full[0] != '~') next.push_back(full[0] == '/' ? full : parent_of(config) + "/" + full);
      }
    }
    configs = std::move(next);
  }
}

std::string ProtectedLinks::expand_home(const std::string& path) const {
  // "~" is the host user's home: the workspace when the workspace is a home by its shape (a
  // shell's start-up file or a .gitconfig at its top); else somewhere the sandbox cannot write.
  if (path.empty() || path[0] != '~' || (path.size() > 1 && path[1] != '/')) return path;
  if (!home_) {
    Fd top(::open(workspace_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    struct stat st {};
    home_ = top && (holds_shell_start_up(top.get()) ||
                    ::fstatat(top.get(), ".gitconfig", &st, AT_SYMLINK_NOFOLLOW) == 0);
  }
  return *home_ ? workspace_ + path.substr(1) : path;
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
    if (way.unknown) {
      bounded = held.hold({}, item.link) && bounded;
      continue;
    }
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
