#include "kernel/session/history.hpp"

#include <fnmatch.h>

#include <set>

namespace belljar {

bool glob_match(const std::string& pattern, const std::string& text) {
  return ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

void History::add(int execution_count, const std::string& source, const std::string& output) {
  entries_.push_back({execution_count, source, output});
  if (entries_.size() > capacity_) entries_.pop_front();
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
    for (auto& e : entries_)
      if (e.line >= start && (stop <= 0 || e.line < stop)) out.push_back(row(e));
  } else if (access == "search") {
    std::string pattern = request.value("pattern", "*");
    long long n = number("n", 0);
    bool unique = request.value("unique", false);
    std::set<std::string> seen;
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
      if (!glob_match(pattern, it->source)) continue;
      if (unique && !seen.insert(it->source).second) continue;
      out.insert(out.begin(), row(*it));
      if (n > 0 && static_cast<long long>(out.size()) >= n) break;
    }
  }
  return out;
}

}  // namespace belljar
