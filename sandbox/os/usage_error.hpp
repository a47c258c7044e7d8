#pragma once
// A bad flag, size, file or address the user gave. The message names it; callers print one
// line and exit 2. Here, below every layer that reads what a user gives (the policy, the
// kernel's connection file and ports), so none of them depends on another for it.
#include <stdexcept>

namespace belljar {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace belljar
