#include "sandbox/layers/workspace_guard.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "sandbox/layers/held_names.hpp"
#include "sandbox/os/fd.hpp"
#include "sandbox/os/path_parts.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

bool matches_hide_pattern(const std::string& pattern, const std::string& relative) {
  if (pattern.empty()) return false;
  auto path = path_components(relative);
  if (path.empty()) return false;
  bool anchored = pattern[0] == '/';
  std::string trimmed = pattern;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  auto pat = path_components(trimmed);
  if (pat.empty() || pat.size() > path.size()) return false;
  if (anchored && pat.size() != path.size()) return false;
  size_t offset = path.size() - pat.size();
  for (size_t i = 0; i < pat.size(); ++i)
    if (::fnmatch(pat[i].c_str(), path[offset + i].c_str(), 0) != 0) return false;
  return true;
}

namespace {

// One component of a pattern; the common shapes (a plain name, "*.pem") skip fnmatch.
struct PatternPart {
  enum class Kind { literal, suffix, glob } kind = Kind::glob;
  std::string text;  // the literal, the suffix, or the glob
  explicit PatternPart(const std::string& part) : text(part) {
    auto is_meta = [](char c) { return c == '*' || c == '?' || c == '[' || c == '\\'; };
    bool meta_after_first = std::any_of(part.begin() + (part.empty() ? 0 : 1), part.end(), is_meta);
    if (std::none_of(part.begin(), part.end(), is_meta)) {
      kind = Kind::literal;
    } else if (part.size() > 1 && part[0] == '*' && !meta_after_first) {
      kind = Kind::suffix;
      text = part.substr(1);
    }
  }
  bool matches(const std::string& name) const {
    switch (kind) {
      case Kind::literal:
        return name == text;
      case Kind::suffix:
        return name.size() >= text.size() &&
               name.compare(name.size() - text.size(), text.size(), text) == 0;
      case Kind::glob:
        return ::fnmatch(text.c_str(), name.c_str(), 0) == 0;
    }
    return false;
  }
};

struct CompiledPattern {
  std::vector<PatternPart> parts;
  bool anchored = false;
  std::string text;
};

std::vector<CompiledPattern> compile(const std::vector<std::string>& patterns) {
  std::vector<CompiledPattern> compiled;
  for (const auto& pattern : patterns) {
    std::string trimmed = pattern;
    while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
    CompiledPattern one;
    one.anchored = !pattern.empty() && pattern[0] == '/';
    one.text = pattern;
    for (const auto& part : path_components(trimmed)) one.parts.emplace_back(part);
    if (!one.parts.empty()) compiled.push_back(std::move(one));
  }
  return compiled;
}

size_t depth_of(const std::string& relative) {
  return static_cast<size_t>(std::count(relative.begin(), relative.end(), '/')) + 1;
}

// A walk with openat/readdir, names kept as a stack of components: the workspace can hold
// tens of thousands of files, and this runs before every cell. One open directory per level,
// at most kMaxDepth of them.
class Survey {
 public:
  Survey(const std::string& workspace, const WorkspaceRules& rules)
      : workspace_(workspace),
        hide_(compile(rules.hide)),
        protect_(compile(rules.protect)),
        measure_(rules.measure),
        closed_(rules.protect, rules.writable, rules.hide) {}

  WorkspaceSurvey run() {
    int fd = ::open(workspace_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw_errno("open(" + workspace_ + ") to survey it");
    struct stat top {};
    if (::fstat(fd, &top) == 0) links_.folder(top.st_dev, top.st_ino, {});
    walk(fd);
    std::vector<ProtectedLinks::End> ends;
    if (!links_.resolve(result_.held, ends))
      throw SetupError("the workspace " + workspace_ + " holds more than " +
                       std::to_string(kMaxHeldNames) +
                       " names on the ways of protected links; remove some links");
    for (const auto& end : ends) {
      std::string rel;
      for (const auto& part : end.relative) rel += (rel.empty() ? "" : "/") + part;
      add(rel, end.directory, static_cast<GuardKind>(end.guard), end.reason);
    }
    bound();
    // Parents before children: a read-only .git goes on before a mask inside it.
    std::stable_sort(result_.guards.begin(), result_.guards.end(),
                     [](const GuardedPath& a, const GuardedPath& b) {
                       return depth_of(a.relative) < depth_of(b.relative);
                     });
    return std::move(result_);
  }

 private:
  const CompiledPattern* matching(const std::vector<CompiledPattern>& patterns) const {
    for (const auto& pattern : patterns) {
      size_t k = pattern.parts.size();
      if (k > stack_.size() || (pattern.anchored && k != stack_.size())) continue;
      size_t offset = stack_.size() - k;
      bool all = true;
      for (size_t i = 0; i < k && all; ++i) all = pattern.parts[i].matches(stack_[offset + i]);
      if (all) return &pattern;
    }
    return nullptr;
  }

  // Whether a component of the entry's path is a dot-name: the rule closes it (a host tool's
  // configuration), so a link there is followed like a protected one.
  bool dotted() const {
    return std::any_of(stack_.begin(), stack_.end(),
                       [](const std::string& part) { return part[0] == '.'; });
  }

  // The git config this entry is, or leads to, when it is a user's: `.gitconfig`, or
  // `.config/git/config` (this entry being that file, or a link at `.config/git` or `.config`).
  std::optional<std::vector<std::string>> user_git_config(unsigned char type) const {
    auto ends_with = [&](std::initializer_list<const char*> tail) {
      if (stack_.size() < tail.size()) return false;
      auto part = stack_.end() - static_cast<long>(tail.size());
      for (const char* name : tail)
        if (*part++ != name) return false;
      return true;
    };
    std::vector<std::string> config = stack_;
    if (type != DT_REG && type != DT_LNK) return std::nullopt;
    if (ends_with({".gitconfig"}) || ends_with({".config", "git", "config"})) return config;
    if (type != DT_LNK) return std::nullopt;
    if (ends_with({".config", "git"})) return config.push_back("config"), config;
    if (ends_with({".config"})) return config.insert(config.end(), {"git", "config"}), config;
    return std::nullopt;
  }

  std::string relative() const {
    std::string rel;
    for (const auto& part : stack_) rel += (rel.empty() ? "" : "/") + part;
    return rel;
  }

  void add(const std::string& rel, bool directory, GuardKind kind, const std::string& reason) {
    auto [it, fresh] = seen_.emplace(rel, result_.guards.size());
    if (fresh) {
      result_.guards.push_back({rel, directory, kind, reason});
    } else if (kind == GuardKind::mask) {
      result_.guards[it->second].kind = GuardKind::mask;  // a secret is never merely read-only
    }
  }

  // Too many guards (thousands of .env files planted to exhaust the mount table) collapse into
  // their top-level directories, masked or kept read-only whole: bounded, and still closed.
  void bound() {
    if (result_.guards.size() <= kMaxGuards) return;
    std::map<std::string, GuardedPath> top;
    for (const auto& guard : result_.guards) {
      auto slash = guard.relative.find('/');
      GuardedPath coarse = guard;
      if (slash != std::string::npos) {
        coarse.relative = guard.relative.substr(0, slash);
        coarse.directory = true;
        coarse.reason = "holds more guarded paths than " + std::to_string(kMaxGuards);
      }
      auto [it, fresh] = top.emplace(coarse.relative, coarse);
      if (!fresh && coarse.kind == GuardKind::mask) it->second.kind = GuardKind::mask;
    }
    // The morgue is belljar's own mount, beyond the workspace's share.
    if (top.size() - top.count(kMorgueName) > kMaxGuards)
      throw SetupError("the workspace " + workspace_ + " holds more than " +
                       std::to_string(kMaxGuards) +
                       " secret or protected entries at its top level; remove some");
    result_.guards.clear();
    for (auto& [name, guard] : top) result_.guards.push_back(std::move(guard));
  }

  // Takes ownership of fd.
  void walk(int fd) {
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
      ::close(fd);
      throw_errno("fdopendir(" + workspace_ + "/" + relative() + ")");
    }
    bool git_head = false;  // a HEAD: a repository, or one in the making (holds_git_repository)
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      git_head = git_head || name == "HEAD";
      unsigned char type = entry->d_type;
      struct stat st {};
      bool have_stat = false;
      if (type == DT_UNKNOWN || (measure_ && type != DT_DIR)) {
        have_stat = ::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (!have_stat && type == DT_UNKNOWN) {
          // Can't even tell what it is (the directory is not searchable): not trusted.
          stack_.push_back(name);
          add(relative(), false, GuardKind::mask, "unreadable");
          stack_.pop_back();
          continue;
        }
        if (type == DT_UNKNOWN)
          type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_REG;
      }
      stack_.push_back(name);
      ++result_.entries;
      if (stack_.size() == 1 && name == kMorgueName) {
        // Masked (the sandbox may neither list nor reach it) and counted all the same: what
        // lies there is still held open by the session.
        add(relative(), type == DT_DIR, GuardKind::mask, "belljar's morgue");
        if (type == DT_DIR) count_morgue(dir, name);
        stack_.pop_back();
        continue;
      }
      const CompiledPattern* secret = matching(hide_);
      const CompiledPattern* guarded = secret ? secret : matching(protect_);
      GuardKind kind = secret ? GuardKind::mask : GuardKind::read_only;
      // A repository's `.git`, and a user's git config wherever a home may lie (git runs with
      // HOME set to any folder), each read as git reads it, through links (a stow-linked
      // .gitconfig, a folded .config/git: the fifth outside pass).
      if (name == ".git" && (type == DT_DIR || type == DT_REG || type == DT_LNK))
        links_.git(stack_);
      if (auto config = user_git_config(type)) links_.git_config(*config);
      if (type == DT_LNK && (guarded || dotted())) {
        // A host tool follows it: its way is held (held_names.hpp); a pattern's end is
        // guarded as the link asks.
        links_.link(stack_, guarded ? std::optional<int>(static_cast<int>(kind)) : std::nullopt,
                    guarded ? guarded->text : "a dot-name");
      } else if (guarded) {
        add(relative(), type == DT_DIR, kind, guarded->text);  // a directory is guarded whole
        // Not walked for the quota below: a masked directory is empty inside, a read-only one
        // can't grow. Its links are followed all the same: a host tool follows them.
        if (type == DT_DIR) links_.inside(stack_, static_cast<int>(kind), guarded->text);
      } else if (type == DT_DIR) {
        descend(dir, name);
      } else if (have_stat) {
        // Every entry's blocks: a symlink's long target takes a block of its own (the outside
        // red team's third pass made 48 MiB of them under a 32M quota, counted as nothing).
        result_.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
      }
      stack_.pop_back();
    }
    // Its hooks run at every push, and its config may name more (held_names.hpp).
    if (git_head) links_.bare_repository(stack_);
    ::closedir(dir);
  }

  // The morgue's files: each kernel's folder (morgue_folder) and the regular files the broker
  // put in it, with the folders' own blocks.
  void count_morgue(DIR* dir, const std::string& name, bool kernels = true) {
    int fd = ::openat(::dirfd(dir), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;  // gone since readdir; an unreadable one is masked all the same
    DIR* morgue = ::fdopendir(fd);
    if (!morgue) {
      ::close(fd);
      return;
    }
    struct stat st {};
    if (measure_ && ::fstat(fd, &st) == 0)
      result_.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    while (dirent* entry = ::readdir(morgue)) {
      if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) continue;
      ++result_.entries;
      if (kernels && entry->d_type == DT_DIR) {
        count_morgue(morgue, entry->d_name, false);
        continue;
      }
      if (measure_ && ::fstatat(fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        result_.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    }
    ::closedir(morgue);
  }

  void descend(DIR* dir, const std::string& name) {
    if (stack_.size() >= kMaxDepth) {
      add(relative(), true, GuardKind::mask, "nested deeper than " + std::to_string(kMaxDepth));
      return;
    }
    int child =
        ::openat(::dirfd(dir), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child >= 0) {
      // A folder's own blocks grow with its entries (long names): counted too. Its identity
      // names it for the ways of links (another spelling of it is the same folder).
      struct stat st {};
      if (::fstat(child, &st) == 0) {
        links_.folder(st.st_dev, st.st_ino, stack_);
        if (measure_) result_.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
      }
      walk(child);
    } else if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
      // Gone or replaced since readdir: the next survey sees what it became.
    } else {
      // Unreadable (EACCES: made so, perhaps by the sandbox itself, to hide what is inside),
      // or out of descriptors: what we can't look into is masked whole, never trusted.
      add(relative(), true, GuardKind::mask, "unreadable (" + errno_text(errno) + ")");
    }
  }

  std::string workspace_;
  std::vector<CompiledPattern> hide_, protect_;
  bool measure_ = false;
  std::vector<std::string> stack_;
  WorkspaceSurvey result_;
  std::map<std::string, size_t> seen_;
  WorkspaceRule closed_;  // what the broker's rule closes by name: held already
  ProtectedLinks links_{workspace_, &closed_};
};

}  // namespace

int take_removal_lease(int dir, const char* name, Fd& held) {
  // O_NONBLOCK: a lease someone else holds on it is not waited for (EWOULDBLOCK).
  constexpr int kFlags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  held.reset(::openat(dir, name, kFlags));
  if (!held && errno == EACCES) {
    struct stat st {};
    if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        ::fchmodat(dir, name, (st.st_mode & 07777) | S_IWUSR, 0) == 0)
      held.reset(::openat(dir, name, kFlags));
  }
  if (!held) return errno;
  return ::fcntl(held.get(), F_SETLEASE, F_WRLCK) == 0 ? 0 : errno;
}

bool drop_bytes(int held) {
  return ::ftruncate(held, 0) == 0;
}

namespace {

// The names in the folder `dir` (a descriptor, left open), "." and ".." left out; empty when it
// cannot be read.
std::vector<std::string> names_in(int dir) {
  std::vector<std::string> names;
  Fd copy(::fcntl(dir, F_DUPFD_CLOEXEC, 0));
  DIR* stream = copy ? ::fdopendir(copy.get()) : nullptr;
  if (!stream) return names;
  copy.release();
  while (dirent* entry = ::readdir(stream))
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0)
      names.emplace_back(entry->d_name);
  ::closedir(stream);
  return names;
}

}  // namespace

void empty_morgue(int morgue, bool unheld_only) {
  for (const auto& name : names_in(morgue)) {
    if (unheld_only) {
      Fd held;
      if (take_removal_lease(morgue, name.c_str(), held) != 0 || !drop_bytes(held.get())) continue;
      (void)::unlinkat(morgue, name.c_str(), 0);  // while the lease is held
    } else if (::unlinkat(morgue, name.c_str(), 0) != 0 && errno == EISDIR) {
      (void)::unlinkat(morgue, name.c_str(), AT_REMOVEDIR);
    }
  }
}

std::string morgue_folder(const std::string& name) {
  return std::string(kMorgueName) + "/" + name;
}

void remove_dead_morgues(int morgue, const std::string& except) {
  for (const auto& name : names_in(morgue)) {
    if (name[0] == '.' || name == except) continue;
    Fd theirs(::openat(morgue, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!theirs || ::flock(theirs.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive
    empty_morgue(theirs.get(), false);
    (void)::unlinkat(morgue, name.c_str(), AT_REMOVEDIR);
  }
}

void sweep_dead_morgues(const std::string& workspace) {
  std::string path = workspace + "/" + kMorgueName;
  Fd morgue(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!morgue) return;
  remove_dead_morgues(morgue.get(), "");
  (void)::rmdir(path.c_str());  // ENOTEMPTY: a live kernel's is there
}

void sweep_morgue(const std::string& workspace, const std::string& name, bool unheld_only) {
  std::string path = workspace + "/" + morgue_folder(name);
  Fd morgue(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!morgue) return;
  empty_morgue(morgue.get(), unheld_only);
  if (unheld_only) return;
  (void)::rmdir(path.c_str());
  (void)::rmdir((workspace + "/" + kMorgueName).c_str());  // ENOTEMPTY: another kernel's is there
}

WorkspaceSurvey survey_workspace(const std::string& workspace, const WorkspaceRules& rules) {
  return Survey(workspace, rules).run();
}

std::vector<GuardedPath> find_secrets(const std::string& workspace,
                                      const std::vector<std::string>& patterns) {
  WorkspaceRules rules;
  rules.hide = patterns;
  return survey_workspace(workspace, rules).guards;
}

}  // namespace belljar
