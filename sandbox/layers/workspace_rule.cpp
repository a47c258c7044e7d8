#include "sandbox/layers/workspace_rule.hpp"

#include <fnmatch.h>

#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/path_parts.hpp"

namespace belljar {

namespace {

std::string joined(const std::vector<std::string>& parts, size_t count) {
  std::string text;
  for (size_t i = 0; i < count; ++i) text += (i ? "/" : "") + parts[i];
  return text;
}

bool matches_any(const std::vector<std::string>& patterns, const std::string& path) {
  for (const auto& pattern : patterns)
    if (matches_hide_pattern(pattern, path)) return true;
  return false;
}

// `relative` is a folder some path matching `pattern` lies below: its last components match the
// pattern's first ones (all of them, for an anchored pattern).
bool above_pattern(const std::string& pattern, const std::vector<std::string>& relative) {
  if (pattern.empty() || relative.empty()) return false;
  bool anchored = pattern[0] == '/';
  auto pat = path_components(pattern);
  if (pat.size() <= 1) return false;
  for (size_t k = anchored ? relative.size() : 1; k < pat.size() && k <= relative.size(); ++k) {
    size_t offset = relative.size() - k;
    bool all = true;
    for (size_t i = 0; i < k && all; ++i)
      all = ::fnmatch(pat[i].c_str(), relative[offset + i].c_str(), 0) == 0;
    if (all) return true;
    if (anchored) break;
  }
  return false;
}

bool environment_part(const std::string& name) {
  return name == "site-packages" || name == "dist-packages";
}

}  // namespace

std::optional<std::string> refusal(const WorkspaceRule& rule,
                                   const std::vector<std::string>& relative, NameChange change) {
  if (relative.empty()) return "the workspace itself";
  bool opened = false;  // a --writable pattern names this path or one above it
  for (size_t i = 0; i < relative.size(); ++i) {
    std::string prefix = joined(relative, i + 1);
    if (matches_any(rule.protect, prefix)) return "protected";
    opened = opened || matches_any(rule.writable, prefix);
  }
  if (opened) return std::nullopt;
  for (size_t i = 0; i < relative.size(); ++i) {
    const std::string& part = relative[i];
    if (!part.empty() && part[0] == '.') {
      if (change == NameChange::make_folder && i + 1 == relative.size())
        for (const auto& pattern : rule.writable)
          if (above_pattern(pattern, relative)) return std::nullopt;
      return "a dot-path, which host tools read";
    }
    if (environment_part(part)) return "inside a Python environment";
  }
  return std::nullopt;
}

bool closed_name(const WorkspaceRule& rule, const std::vector<std::string>& relative) {
  return refusal(rule, relative, NameChange::other).has_value();
}

}  // namespace belljar
