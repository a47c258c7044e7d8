#include "sandbox/jail_client/python_layout.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "sandbox/jail_client/worker_process.hpp"
#include "sandbox/os/small_file.hpp"
#include "sandbox/policy/interpreter.hpp"

namespace belljar {
namespace fs = std::filesystem;

namespace {

bool under(const fs::path& path, const fs::path& dir) {
  auto rel = path.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// CPython's landmark: lib/pythonX.Y/os.py (lib64 on some distributions) below the prefix.
bool is_prefix(const fs::path& dir) {
  std::error_code ec;
  for (const char* lib : {"lib", "lib64"}) {
    fs::directory_iterator it(dir / lib, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (name.rfind("python3", 0) == 0 && fs::exists(it->path() / "os.py", ec)) return true;
    }
    ec.clear();
  }
  return false;
}

// A setting of pyvenv.cfg ("home", "include-system-site-packages"); empty when absent.
std::string venv_setting(const fs::path& cfg, const std::string& wanted) {
  std::string text = read_small_file(cfg);
  for (auto line_view : lines(text)) {
    std::string line(line_view);
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (key != wanted) continue;
    std::string value = line.substr(eq + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r") + 1);
    return value;
  }
  return {};
}

// The nearest directory above the interpreter holding its standard library. Never a guess:
// a guessed prefix could be a whole home directory or the host's /tmp.
fs::path find_prefix(const fs::path& bin_dir, const std::string& python) {
  fs::path dir = bin_dir;
  for (int up = 0; up < 4 && dir != dir.root_path(); ++up) {
    if (is_prefix(dir)) return dir;
    dir = dir.parent_path();
  }
  throw SandboxError("--python " + python +
                     ": no standard library (lib/python3.*/os.py) found above " + bin_dir.string() +
                     ", so the sandbox would not know what to bind for it");
}

}  // namespace

PythonLayout locate_python(const std::string& python) {
  if (python.empty() || python[0] != '/')
    throw SandboxError("--python " + python + ": not an absolute path");
  std::error_code ec;
  fs::path real = fs::canonical(python, ec);
  if (ec) throw SandboxError("--python " + python + ": " + ec.message());
  if (::access(real.c_str(), X_OK) != 0)
    throw SandboxError("--python " + python + ": not executable");
  if (is_script(real))
    throw SandboxError("--python " + python +
                       " is a script (a pyenv shim?), which cannot run inside the sandbox: pass "
                       "the interpreter itself, as printed by "
                       "python3 -c 'import sys; print(sys.executable)'");

  PythonLayout layout;
  fs::path given(python);
  fs::path venv;
  for (fs::path dir : {given.parent_path(), given.parent_path().parent_path()})
    if (fs::exists(dir / "pyvenv.cfg", ec)) {
      venv = fs::canonical(dir, ec);
      if (!ec) break;
      venv.clear();
    }

  fs::path base_bin = real.parent_path();
  if (!venv.empty()) {
    // A venv's python is a symlink to the base interpreter; it must run under its venv name
    // for sys.prefix to be the venv.
    layout.exec_path = (fs::canonical(given.parent_path(), ec) / given.filename()).string();
    layout.prefixes.push_back(venv);
    layout.bin_dirs.push_back(venv / "bin");
    layout.venv = true;
    layout.system_site_packages =
        venv_setting(venv / "pyvenv.cfg", "include-system-site-packages") == "true";
    std::string home = venv_setting(venv / "pyvenv.cfg", "home");
    if (!home.empty()) {
      fs::path home_real = fs::canonical(home, ec);
      if (!ec) base_bin = home_real;
    }
  } else {
    // Keep /usr/bin/python3 as given when its directory is the real one: the symlink hops
    // stay inside the same bound tree. Otherwise exec the file itself.
    fs::path dir_real = fs::canonical(given.parent_path(), ec);
    fs::path prefix = find_prefix(real.parent_path(), python);
    layout.exec_path =
        (!ec && under(dir_real, prefix)) ? (dir_real / given.filename()).string() : real.string();
  }

  fs::path base = find_prefix(base_bin, python);
  if (base != base.root_path()) layout.prefixes.push_back(base);
  layout.bin_dirs.push_back(real.parent_path());
  return layout;
}

std::vector<fs::path> site_package_dirs(const PythonLayout& layout) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  auto add = [&](const fs::path& dir) {
    if (fs::is_directory(dir, ec) && std::find(dirs.begin(), dirs.end(), dir) == dirs.end())
      dirs.push_back(dir);
  };
  // Every lib/python3.*/ below `prefix` (a base's only where its standard library is).
  auto versioned = [&](const fs::path& prefix, bool stdlib_only, const char* leaf) {
    for (const char* lib : {"lib", "lib64"}) {
      fs::directory_iterator it(prefix / lib, ec), end;
      for (; !ec && it != end; it.increment(ec)) {
        std::string name = it->path().filename().string();
        if (name.rfind("python3.", 0) != 0) continue;
        if (stdlib_only && !fs::exists(it->path() / "os.py", ec)) continue;
        add(it->path() / leaf);
      }
      ec.clear();
    }
  };
  for (size_t i = 0; i < layout.prefixes.size(); ++i) {
    const fs::path& prefix = layout.prefixes[i];
    bool is_venv = layout.venv && i == 0;
    if (is_venv) {
      versioned(prefix, false, "site-packages");
      continue;
    }
    if (layout.venv && !layout.system_site_packages) break;
    versioned(prefix, true, "site-packages");
    versioned(prefix, true, "dist-packages");
    add(prefix / "lib/python3/dist-packages");  // Debian's packages, for every version
    versioned(prefix / "local", false, "dist-packages");
  }
  return dirs;
}

bool has_site_package(const PythonLayout& layout, const std::string& package) {
  std::error_code ec;
  for (const fs::path& dir : site_package_dirs(layout))
    if (fs::is_regular_file(dir / package / "__init__.py", ec)) return true;
  return false;
}

}  // namespace belljar
