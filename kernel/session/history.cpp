#include "kernel/session/history.hpp"

#include <fnmatch.h>

#include <set>

#include "kernel/session/cell_budget.hpp"

namespace belljar {

bool glob_match(const std::string& pattern, const std::string& text) {
  return ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

void History::add(int execution_count, const std::string& source, const std::string& output) {
  Entry entry{execution_count, source, {}};
  if (output.size() <= kOutputBytes) {
    entry.output = output;
  } else {
    const std::string_view ellipsis = "\u2026";
    entry.output = utf8_prefix(output, kOutputBytes - ellipsis.size());
    entry.output += ellipsis;
    entry.output.shrink_to_fit();  // the bound counts sizes: no slack kept beyond them
  }
  size_t bytes = entry.source.size() + entry.output.size();
  entries_.push(std::move(entry), bytes);
}

nlohmann::json History::query(const nlohmann::json& request) const {
  bool with_output = request.value("output", false);
  auto row = [&](const Entry& e) {
    nlohmann::json cell = e.source;
    if (with_output)
      cell = nlohmann::json::array(
          {e.source, e.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.output)});
    return nlohmann::json::array({kSession, e.line, cell});
  };
  nlohmann::json out = nlohmann::json::array();
  std::string access = request.value("hist_access_type", "tail");
  auto number = [&](const char* key, long long fallback) {
    auto it = request.find(key);
    return it != request.end() && it->is_number_integer() ? it->get<long long>() : fallback;
  };
  if (access == "tail") {
    long long n = std::max<long long>(0, number("n", 10));
    size_t start = entries_.size() > static_cast<size_t>(n) ? entries_.size() - n : 0;
    for (size_t i = start; i < entries_.size(); ++i) out.push_back(row(entries_[i]));
  } else if (access == "range") {
    // Session 0 or 1 (or a negative offset to it) is this kernel's; earlier ones are not kept.
    long long session = number("session", 0);
    if (session != 0 && session != kSession && session >= 0) return out;
    long long start = number("start", 1), stop = number("stop", 0);
    for (size_t i = 0; i < entries_.size(); ++i)
      if (const Entry& e = entries_[i]; e.line >= start && (stop <= 0 || e.line < stop))
        out.push_back(row(e));
  } else if (access == "search") {
    std::string pattern = request.value("pattern", "*");
    long long n = number("n", 0);
    bool unique = request.value("unique", false);
    std::set<std::string> seen;
    for (size_t i = entries_.size(); i-- > 0;) {
      const Entry& e = entries_[i];
      if (!glob_match(pattern, e.source)) continue;
      if (unique && !seen.insert(e.source).second) continue;
      out.insert(out.begin(), row(e));
      if (n > 0 && static_cast<long long>(out.size()) >= n) break;
    }
  }
  return out;
}

}  // namespace belljar
