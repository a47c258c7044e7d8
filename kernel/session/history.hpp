#pragma once
// Cell history for history_request (tail, range, search: what a console loads and searches),
// kept by the supervisor so it outlives worker restarts.
// Bounded: an agent may run tens of thousands of cells in one session, and history used to be
// the supervisor's largest per-cell cost (every source and result kept). It keeps the newest
// `--history-size` cells (1000 by default: what jupyter console loads at start, twice what
// JupyterLab's console asks for), and fewer once their code and results pass kBytes; each
// result is kept cut to kOutputBytes. Past that the oldest are dropped, not written to a file:
// history dies with the kernel anyway (this kernel answers no earlier session), so a file would
// buy only range and search over older cells of this one, at the price of every cell's code on
// the host's disk, where the audit log keeps only its hash unless --audit-code asks for it.
// Line numbers stay the cells' execution counts, so a range reaching back past the cells kept
// answers those still kept.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "kernel/session/newest_entries.hpp"

namespace belljar {

class History {
 public:
  static constexpr size_t kDefaultEntries = 1000;
  static constexpr size_t kBytes = 4u << 20;        // code and results of the cells kept
  static constexpr size_t kOutputBytes = 4u << 10;  // of one cell's result (a repr, a table)

  explicit History(size_t entries = kDefaultEntries) : entries_(entries, kBytes) {}
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
  NewestEntries<Entry> entries_;
};

// fnmatch-style glob used by history search ("*" and "?").
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace belljar
