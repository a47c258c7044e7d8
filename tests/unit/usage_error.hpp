#pragma once
// What a bad flag, size or policy file is told: the UsageError message a call throws, for the
// tests of the policy's parsers and of the command line.
#include <string>

#include "sandbox/policy/policy.hpp"

namespace belljar::testing {

// The UsageError message, or "" when the call did not throw one.
template <typename F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace belljar::testing
