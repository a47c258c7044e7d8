#include "sandbox/layers/workspace_rule.hpp"

#include <fnmatch.h>

#include "sandbox/os/path_parts.hpp"

namespace belljar {

namespace {

bool environment_part(const std::string& name) {
  return name == "site-packages" || name == "dist-packages";
}

bool glob_matches(const std::string& glob, const std::string& name) {
  return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

}  // namespace

WorkspaceRule::WorkspaceRule(const std::vector<std::string>& protect,
                             const std::vector<std::string>& writable)
    : protect_(compiled(protect)), writable_(compiled(writable)) {}

std::vector<WorkspaceRule::Pattern> WorkspaceRule::compiled(
    const std::vector<std::string>& patterns) {
  std::vector<Pattern> out;
  for (const auto& text : patterns) {
    Pattern pattern{!text.empty() && text[0] == '/', path_components(text)};
    if (!pattern.parts.empty()) out.push_back(std::move(pattern));
  }
  return out;
}

bool WorkspaceRule::Pattern::matches(const std::vector<std::string>& path, size_t length) const {
  if (parts.size() > length || (anchored && parts.size() != length)) return false;
  size_t offset = length - parts.size();
  for (size_t i = 0; i < parts.size(); ++i)
    if (!glob_matches(parts[i], path[offset + i])) return false;
  return true;
}

bool WorkspaceRule::Pattern::below(const std::vector<std::string>& path) const {
  if (parts.size() <= 1 || path.empty()) return false;
  for (size_t k = anchored ? path.size() : 1; k < parts.size() && k <= path.size(); ++k) {
    size_t offset = path.size() - k;
    bool all = true;
    for (size_t i = 0; i < k && all; ++i) all = glob_matches(parts[i], path[offset + i]);
    if (all) return true;
    if (anchored) break;
  }
  return false;
}

std::optional<std::string> WorkspaceRule::refusal(const std::vector<std::string>& relative,
                                                  NameChange change) const {
  if (relative.empty()) return "the workspace itself";
  bool opened = false;  // a --writable pattern names this path or one above it
  for (size_t length = 1; length <= relative.size(); ++length) {
    for (const auto& pattern : protect_)
      if (pattern.matches(relative, length)) return "protected";
    for (const auto& pattern : writable_) opened = opened || pattern.matches(relative, length);
  }
  if (opened) return std::nullopt;
  for (size_t i = 0; i < relative.size(); ++i) {
    const std::string& part = relative[i];
    if (!part.empty() && part[0] == '.') {
      if (change == NameChange::make_folder && i + 1 == relative.size())
        for (const auto& pattern : writable_)
          if (pattern.below(relative)) return std::nullopt;
      return "a dot-path, which host tools read";
    }
    if (environment_part(part)) return "inside a Python environment";
  }
  return std::nullopt;
}

}  // namespace belljar
