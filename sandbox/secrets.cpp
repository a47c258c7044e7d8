#include "sandbox/secrets.hpp"

#include <fnmatch.h>

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

std::vector<SecretMask> find_secrets(const fs::path& workspace, const std::vector<std::string>& patterns) {
  std::vector<SecretMask> masks;
  std::set<std::string> seen;
  auto matches = [&](const fs::path& rel) {
    for (const auto& pattern : patterns)
      if (matches_hide_pattern(pattern, rel)) return true;
    return false;
  };
  auto add = [&](const fs::path& rel, bool directory) {
    if (seen.insert(rel.string()).second) masks.push_back({rel.string(), directory});
  };

  std::error_code ec;
  fs::recursive_directory_iterator it(workspace, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(workspace);
    std::error_code type_ec;
    auto status = it->symlink_status(type_ec);
    if (type_ec || !matches(rel)) continue;
    if (fs::is_symlink(status)) {
      fs::path target = fs::canonical(it->path(), type_ec);
      if (!type_ec && inside(target, workspace))
        add(target.lexically_relative(workspace), fs::is_directory(target, type_ec));
      continue;
    }
    add(rel, fs::is_directory(status));
    if (fs::is_directory(status)) it.disable_recursion_pending();  // masked whole
  }
  // A walk cut short would leave secrets unmasked: that is an error, not a shrug.
  if (ec) throw SetupError("scanning the workspace " + workspace.string() + " for secrets: " + ec.message());
  return masks;
}

}  // namespace belljar
