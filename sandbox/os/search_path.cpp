// PATH-like lists (search_path.hpp).
#include "sandbox/os/search_path.hpp"

namespace belljar {

std::vector<std::string> split_search_path(std::string_view list) {
  std::vector<std::string> dirs;
  size_t start = 0;
  for (;;) {
    size_t end = list.find(':', start);
    dirs.emplace_back(list.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return dirs;
    start = end + 1;
  }
}

std::string join_search_path(const std::vector<std::string>& dirs) {
  std::string list;
  for (const auto& dir : dirs) list += (list.empty() ? "" : ":") + dir;
  return list;
}

}  // namespace belljar
