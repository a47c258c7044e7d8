#pragma once
// The interpreter the worker runs (--python), found without running anything on the host.
//
// The threat: asking a launcher script (a pyenv shim, a wrapper) for the real interpreter runs
// whatever that script says, on the host, as the kernel's user (root, at times), before any
// sandbox exists. So a `#!` script is never executed: a pyenv shim is resolved the way pyenv
// itself would resolve it, by reading its version files; any other script is refused with the
// command that prints the interpreter. A venv's bin/python is a binary (or a link to one) and
// is kept as given, so the venv's packages stay visible.
#include <optional>
#include <string>

namespace belljar {

// An absolute path to an executable interpreter, or UsageError naming the flag and the fix.
// A bare name is looked up on PATH (install resolves it once, so kernel.json names a real
// file): a pyenv shim yields the version pyenv would run; other scripts are passed over.
std::string resolve_python(const std::string& flag, const std::string& text);

// What a pyenv shim at `shim` would run, read from PYENV_VERSION, the nearest .python-version
// from the working directory up, or $PYENV_ROOT/version; nullopt when `shim` is not one, when
// the version is "system" (the next interpreter on PATH is then the one), or when the version
// named is not installed.
std::optional<std::string> pyenv_interpreter(const std::string& shim);

// A file that starts with "#!": a script, never run on the host in place of an interpreter.
bool is_script(const std::string& path);

}  // namespace belljar
