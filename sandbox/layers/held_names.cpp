#include "sandbox/layers/held_names.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <deque>

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
      if (!done.empty()) done.pop_back();
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

bool HeldNames::hold(const std::string& workspace, const std::string& path,
                     const std::string& link) {
  std::vector<std::string> relative;
  if (path_components(path) != path_components(workspace)) {
    auto below = path_below(path, workspace);
    if (!below) return true;  // outside the workspace: not the sandbox's to change
    relative = path_components(*below);
  }
  for (const auto& name : names_)
    if (name.path == relative) return true;
  if (names_.size() >= kMaxHeldNames) return false;
  names_.push_back({std::move(relative), link});
  return true;
}

const HeldName* HeldNames::holding(const std::vector<std::string>& relative) const {
  for (const auto& name : names_)
    if (starts_with(relative, name.path)) return &name;
  return nullptr;
}

std::vector<const HeldName*> HeldNames::beyond(const std::vector<std::string>& relative) const {
  std::vector<const HeldName*> found;
  for (const auto& name : names_)
    if (name.path.size() > relative.size() && starts_with(name.path, relative))
      found.push_back(&name);
  return found;
}

}  // namespace belljar
