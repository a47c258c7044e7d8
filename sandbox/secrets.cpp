#include "sandbox/secrets.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "sandbox/setup_error.hpp"

namespace belljar {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> components(const fs::path& path) {
  std::vector<std::string> parts;
  for (const auto& part : path)
    if (!part.empty() && part != "/" && part != ".") parts.push_back(part.string());
  return parts;
}

bool inside(const fs::path& path, const fs::path& dir) {
  auto rel = path.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != ".." && rel != ".";
}

}  // namespace

bool matches_hide_pattern(const std::string& pattern, const fs::path& relative) {
  if (pattern.empty()) return false;
  auto path = components(relative);
  if (path.empty()) return false;
  bool anchored = pattern[0] == '/';
  std::string trimmed = pattern;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  auto pat = components(trimmed);
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
};

// A walk with openat/readdir, names kept as a stack of components: the workspace can hold
// tens of thousands of files, and this runs on every start.
class SecretScan {
 public:
  SecretScan(const fs::path& workspace, const std::vector<std::string>& patterns)
      : workspace_(workspace) {
    for (const auto& pattern : patterns) {
      std::string trimmed = pattern;
      while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
      CompiledPattern compiled;
      compiled.anchored = !pattern.empty() && pattern[0] == '/';
      for (const auto& part : components(trimmed)) compiled.parts.emplace_back(part);
      if (!compiled.parts.empty()) patterns_.push_back(std::move(compiled));
    }
  }

  std::vector<SecretMask> run() {
    int fd = ::open(workspace_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw_errno("open(" + workspace_.string() + ") to scan it for secrets");
    walk(fd);
    return std::move(masks_);
  }

 private:
  bool matches() const {
    for (const auto& pattern : patterns_) {
      size_t k = pattern.parts.size();
      if (k > stack_.size() || (pattern.anchored && k != stack_.size())) continue;
      size_t offset = stack_.size() - k;
      bool all = true;
      for (size_t i = 0; i < k && all; ++i) all = pattern.parts[i].matches(stack_[offset + i]);
      if (all) return true;
    }
    return false;
  }

  std::string relative() const {
    std::string rel;
    for (const auto& part : stack_) rel += (rel.empty() ? "" : "/") + part;
    return rel;
  }

  void add(const std::string& rel, bool directory) {
    if (seen_.insert(rel).second) masks_.push_back({rel, directory});
  }

  // Takes ownership of fd.
  void walk(int fd) {
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
      ::close(fd);
      throw_errno("fdopendir(" + workspace_.string() + "/" + relative() + ")");
    }
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      unsigned char type = entry->d_type;
      if (type == DT_UNKNOWN) {
        struct stat st {};
        if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_REG;
      }
      stack_.push_back(name);
      if (matches()) {
        if (type == DT_LNK) {
          std::error_code ec;
          fs::path target = fs::canonical(workspace_ / relative(), ec);
          if (!ec && inside(target, workspace_))
            add(target.lexically_relative(workspace_).string(), fs::is_directory(target, ec));
        } else {
          add(relative(), type == DT_DIR);  // a directory is masked whole
        }
      } else if (type == DT_DIR) {
        int child =
            ::openat(::dirfd(dir), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child >= 0) {
          walk(child);
        } else if (errno != EACCES && errno != ENOENT && errno != ELOOP && errno != ENOTDIR) {
          // A walk cut short would leave secrets unmasked: an error, not a shrug.
          int err = errno;
          ::closedir(dir);
          throw_errno("open(" + workspace_.string() + "/" + relative() + ") to scan it for secrets",
                      err);
        }
      }
      stack_.pop_back();
    }
    ::closedir(dir);
  }

  fs::path workspace_;
  std::vector<CompiledPattern> patterns_;
  std::vector<std::string> stack_;
  std::vector<SecretMask> masks_;
  std::set<std::string> seen_;
};

}  // namespace

std::vector<SecretMask> find_secrets(const fs::path& workspace,
                                     const std::vector<std::string>& patterns) {
  return SecretScan(workspace, patterns).run();
}

}  // namespace belljar
