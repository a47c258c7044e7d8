#pragma once
// PATH-like lists ("/usr/local/bin:/usr/bin:/bin"): split and joined in one place, so the
// --python lookup on the host and the PATH given to the sandbox read them the same way.
#include <string>
#include <string_view>
#include <vector>

namespace belljar {

// Every entry, in order; an empty entry (a leading, trailing or doubled ':') is kept as "",
// which callers skip rather than read as the current directory.
std::vector<std::string> split_search_path(std::string_view list);
std::string join_search_path(const std::vector<std::string>& dirs);

}  // namespace belljar
