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
  bool venv = false;                            // prefixes.front() is a venv
  bool system_site_packages = true;             // the base's packages are importable too
};

// Throws SandboxError when the interpreter is missing, not executable or a script (a pyenv
// shim, say, which needs its manager and the user's home to run).
PythonLayout locate_python(const std::string& python);

// Where the interpreter imports third-party packages from, read from its files as `site` would
// find them: a venv's lib/pythonX.Y/site-packages; the base's site-packages and Debian's
// dist-packages (lib/python3/dist-packages, local/lib/pythonX.Y/dist-packages) when there is
// no venv or the venv includes the system's (include-system-site-packages). Only those that
// exist.
std::vector<std::filesystem::path> site_package_dirs(const PythonLayout& layout);

// Whether `package` (a top-level package's directory name, "debugpy") is in one of them.
bool has_site_package(const PythonLayout& layout, const std::string& package);

}  // namespace belljar
