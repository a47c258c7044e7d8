#pragma once
// Errors of the jail's setup steps. Each names the call, its arguments and errno, like
// nsjail's PLOG: "mount(tmpfs, /tmp): Operation not permitted (EPERM)". They travel back to
// the supervisor as text and become a SandboxError there.
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace belljar {

struct SetupError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "Operation not permitted (EPERM)"
inline std::string errno_text(int err) {
  const char* name = ::strerrordesc_np(err);
  const char* symbol = ::strerrorname_np(err);
  std::string text = name ? name : ("errno " + std::to_string(err));
  if (symbol) text += std::string(" (") + symbol + ")";
  return text;
}

[[noreturn]] inline void throw_errno(const std::string& call, int err = errno) {
  throw SetupError(call + ": " + errno_text(err));
}

}  // namespace belljar
