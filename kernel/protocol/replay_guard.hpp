#pragma once
// Remembers recent signatures so a captured message can't be sent again (jupyter_client keeps
// the same kind of digest history). Bounded: the oldest signatures are forgotten first.
#include <deque>
#include <string>
#include <unordered_set>

namespace belljar {

class ReplayGuard {
 public:
  explicit ReplayGuard(size_t capacity = 1 << 16) : capacity_(capacity) {}
  // True the first time a signature is seen; false for a replay.
  bool admit(const std::string& signature);
  size_t size() const { return seen_.size(); }

 private:
  size_t capacity_;
  std::unordered_set<std::string> seen_;
  std::deque<std::string> order_;
};

}  // namespace belljar
