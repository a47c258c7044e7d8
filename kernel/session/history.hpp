#pragma once
// Cell history, kept by the supervisor so it outlives worker restarts.
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>

namespace belljar {

class History {
 public:
  explicit History(size_t capacity = 10000) : capacity_(capacity) {}
  // output: the text/plain of the cell's result, if it had one (history with output=True).
  void add(int execution_count, const std::string& source, const std::string& output = "");
  // Answers a history_request's content with the reply's "history" list.
  nlohmann::json query(const nlohmann::json& request) const;

 private:
  struct Entry {
    int line;
    std::string source;
    std::string output;
  };
  static constexpr int kSession = 1;  // one session per kernel process
  size_t capacity_;
  std::deque<Entry> entries_;
};

// fnmatch-style glob used by history search ("*" and "?").
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace belljar
