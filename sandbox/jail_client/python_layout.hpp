#pragma once
// Where an interpreter lives, worked out from the files alone: running the interpreter on
// the host to ask it would execute code from a possibly user-writable prefix as the kernel's
// user (root, at times), so we read the layout the way CPython's getpath does instead.
#include <filesystem>
#include <string>
#include <vector>

namespace belljar {

struct PythonLayout {
  std::string exec_path;                        // what the jail execs (a venv keeps its name)
  std::vector<std::filesystem::path> prefixes;  // venv and base prefix, bound read-only
  std::vector<std::filesystem::path> bin_dirs;  // for PATH inside the sandbox
};

// Throws SandboxError when the interpreter is missing, not executable or a script (a pyenv
// shim, say, which needs its manager and the user's home to run).
PythonLayout locate_python(const std::string& python);

}  // namespace belljar
