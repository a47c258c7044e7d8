#include "sandbox/layers/held_names.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <deque>
#include <functional>

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
constexpr size_t kMaxGitFile = 1 << 20;  // a .git file or a git config, read whole up to this
constexpr int kMaxIncludes = 10;         // git's own include depth

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

// A file git reads (a config, a `.git` file, commondir), followed through links as git follows
// them (a stow-linked .gitconfig, a `.git` that is a link). Bounded: past kMaxGitFile, nullopt
// with `*too_large` set, and the caller fails closed (a config cut short was read as shorter:
// an include at its end went unfollowed, the fifth outside pass).
std::optional<std::string> read_small(const std::string& path, bool* too_large = nullptr) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string text(kMaxGitFile + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxGitFile) {
    if (too_large) *too_large = true;
    return std::nullopt;
  }
  text.resize(got);
  return text;
}

}  // namespace

// Read as git reads it (config.c): a UTF-8 byte order mark skipped; sections and keys
// case-insensitive; a section's quoted subsection may hold `]` and `\` escapes; `[section] key =
// value` on one line; a value's quoted parts joined with what follows them, `\` escapes (\n \t
// \b), a `\` at the line's end continuing it, `#` and `;` starting a comment outside quotes.
GitConfigPaths git_config_paths(const std::string& text) {
  GitConfigPaths paths;
  std::string section;
  size_t at = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  auto skip_blanks = [&] {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\r')) ++at;
  };
  auto skip_line = [&] {
    while (at < text.size() && text[at] != '\n') ++at;
  };
  while (at < text.size()) {
    skip_blanks();
    if (at >= text.size()) break;
    char c = text[at];
    if (c == '\n') {
      ++at;
      continue;
    }
    if (c == '#' || c == ';') {
      skip_line();
      continue;
    }
    if (c == '[') {
      // The section's name up to a blank, a quote, a dot or the `]`; a quoted subsection to its
      // closing quote (escapes included), then the `]`.
      ++at;
      std::string name;
      while (at < text.size() && text[at] != ']' && text[at] != '\n' && text[at] != '"' &&
             text[at] != ' ' && text[at] != '\t' && text[at] != '.')
        name += text[at++];
      bool quoted = false;
      while (at < text.size() && text[at] != '\n') {
        char h = text[at++];
        if (quoted && h == '\\' && at < text.size() && text[at] != '\n') {
          ++at;
        } else if (h == '"') {
          quoted = !quoted;
        } else if (!quoted && h == ']') {
          break;
        }
      }
      section = lower(name);
      continue;  // a key may follow on the same line
    }
    // A key: letters, digits, '-'; then '=' and a value, or nothing (a boolean).
    size_t key_start = at;
    while (at < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[at])) || text[at] == '-'))
      ++at;
    std::string key = lower(text.substr(key_start, at - key_start));
    skip_blanks();
    if (key.empty() || at >= text.size() || text[at] != '=') {
      skip_line();
      continue;
    }
    ++at;
    skip_blanks();
    std::string value, pending_blanks;
    bool quoted = false;
    while (at < text.size()) {
      char v = text[at];
      if (v == '\n' && !quoted) break;
      if (!quoted && (v == '#' || v == ';')) {
        skip_line();
        break;
      }
      ++at;
      if (v == '\\' && at < text.size()) {
        char e = text[at++];
        if (e == '\r' && at < text.size() && text[at] == '\n') e = text[at++];  // CRLF
        if (e == '\n') continue;  // the value goes on on the next line
        value += pending_blanks + (e == 'n' ? '\n' : e == 't' ? '\t' : e == 'b' ? '\b' : e);
        pending_blanks.clear();
      } else if (v == '"') {
        quoted = !quoted;
      } else if (!quoted && (v == ' ' || v == '\t' || v == '\r')) {
        pending_blanks += v;  // kept only if more of the value follows
      } else {
        value += pending_blanks + v;
        pending_blanks.clear();
      }
    }
    if (value.empty()) continue;
    if (section == "core" && key == "hookspath") paths.hooks.push_back(value);
    // A template's hooks/ is copied into each repository `git init` or `git clone` makes, and
    // post-checkout runs at once.
    if (section == "init" && key == "templatedir") paths.templates.push_back(value);
    if ((section == "include" || section == "includeif") && key == "path")
      paths.includes.push_back(value);
  }
  return paths;
}

namespace {

// The home in the host's password file of the first entry `matches` (its fields), or "".
std::string home_from_passwd(const std::function<bool(const std::vector<std::string>&)>& matches) {
  auto passwd = read_small("/etc/passwd");
  if (!passwd) return "";
  size_t at = 0;
  while (at < passwd->size()) {
    size_t end = passwd->find('\n', at);
    if (end == std::string::npos) end = passwd->size();
    std::vector<std::string> fields;
    size_t from = at;
    for (size_t colon; (colon = passwd->find(':', from)) < end; from = colon + 1)
      fields.push_back(passwd->substr(from, colon - from));
    fields.push_back(passwd->substr(from, end - from));
    if (fields.size() >= 6 && matches(fields)) return fields[5];
    at = end + 1;
  }
  return "";
}

// The home of the workspace's owner, from the host's password file: what "~" means in the git
// config of the user who works there. Empty when it cannot be said.
std::string owners_home(const std::string& workspace) {
  struct stat st {};
  if (::stat(workspace.c_str(), &st) != 0) return "";
  std::string uid = std::to_string(st.st_uid);
  return home_from_passwd([&](const std::vector<std::string>& fields) { return fields[2] == uid; });
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
  struct stat st {};
  // Followed as git follows it: a `.git` that is a link to a folder elsewhere is that folder.
  if (::stat(at.c_str(), &st) != 0) return;
  std::string worktree = parent_of(at);
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
  repository(git_dir, worktree, relative);
}

void ProtectedLinks::bare_repository(const NameParts& relative) {
  // A bare repository is its own git dir; hooks run with it as their folder.
  std::string at = host_path(relative);
  repository(at, at, relative);
}

void ProtectedLinks::repository(const std::string& git_dir, const std::string& worktree,
                                const NameParts& from) {
  worktrees_.push_back({worktree, joined(from)});
  std::vector<std::string> configs = {git_dir + "/config", git_dir + "/config.worktree"};
  // A worktree's gitdir names the repository it shares (hooks, config) in `commondir`.
  if (auto common = read_small(git_dir + "/commondir")) {
    std::string path = trimmed(common->substr(0, common->find('\n')));
    if (!path.empty()) {
      pointer(git_dir, path, from);
      configs.push_back((path[0] == '/' ? path : git_dir + "/" + path) + "/config");
    }
  }
  config_pointers(configs, worktree, from);
}

void ProtectedLinks::git_config(const NameParts& relative) {
  // The user's own config: a relative hooksPath names a folder in each repository, applied to
  // every repository the survey finds (resolve()).
  config_pointers({host_path(relative)}, "", relative);
}

void ProtectedLinks::config_pointers(std::vector<std::string> configs, const std::string& worktree,
                                     const NameParts& from) {
  // Each config, and what it includes (git's own depth), each file held where it lies.
  for (int depth = 0; depth < kMaxIncludes && !configs.empty(); ++depth) {
    std::vector<std::string> next;
    for (const auto& config : configs) {
      bool too_large = false;
      auto text = read_small(config, &too_large);
      if (too_large)  // what it names cannot all be said: fails closed
        pending_.push_back(
            {workspace_,
             joined(from) + ", whose git config " +
                 config.substr(workspace_.size() < config.size() ? workspace_.size() + 1 : 0) +
                 " is larger than " + std::to_string(kMaxGitFile >> 20) +
                 " MiB, which the survey does not read",
             std::nullopt, "git follows it"});
      if (!text) continue;
      GitConfigPaths paths = git_config_paths(*text);
      std::vector<std::string> folders = paths.hooks;
      folders.insert(folders.end(), paths.templates.begin(), paths.templates.end());
      for (const auto& folder : folders) {
        std::string full = expand_home(folder);
        if (full[0] == '/' || full[0] == '~' || !worktree.empty())
          pointer(worktree, full, from);
        else
          global_hooks_.push_back({full, joined(from)});
      }
      for (const auto& include : paths.includes) {
        std::string full = expand_home(include);
        pointer(parent_of(config), full, from);
        if (full[0] != '~') next.push_back(full[0] == '/' ? full : parent_of(config) + "/" + full);
      }
    }
    configs = std::move(next);
  }
}

std::string ProtectedLinks::expand_home(const std::string& path) const {
  // "~" is the home of the user git runs for: the workspace's owner's, from the password file
  // (none known: left as it is, and not followed).
  if (path.empty() || path[0] != '~') return path;
  size_t slash = path.find('/');
  std::string user = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  std::string rest = slash == std::string::npos ? "" : path.substr(slash);
  if (!user.empty()) {  // ~alice/hooks: alice's home, as git expands it
    std::string home =
        home_from_passwd([&](const std::vector<std::string>& fields) { return fields[0] == user; });
    return home.empty() ? path : home + rest;
  }
  if (!home_) home_ = owners_home(workspace_);
  return home_->empty() ? path : *home_ + rest;
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

void ProtectedLinks::links_in(const std::string& folder, const Pending& from, size_t depth) {
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
    if (type == DT_LNK)
      pending_.push_back({folder + "/" + name, from.link, from.guard, from.reason});
    else if (type == DT_DIR)
      links_in(folder + "/" + name, from, depth + 1);
  }
  ::closedir(dir);
}

void ProtectedLinks::inside(const NameParts& relative, std::optional<int> guard,
                            const std::string& reason) {
  Pending from{host_path(relative), joined(relative), guard, reason};
  links_in(from.path, from, relative.size());
}

bool ProtectedLinks::resolve(HeldNames& held, std::vector<End>& ends) {
  for (const auto& [hooks, config] : global_hooks_)
    for (const auto& [worktree, repository] : worktrees_)
      pending_.push_back({worktree + "/" + hooks, config, std::nullopt, "git follows it"});
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
      links_in(*way.end, item, relative->size());
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
