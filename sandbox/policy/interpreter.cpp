#include "sandbox/policy/interpreter.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "sandbox/os/search_path.hpp"
#include "sandbox/os/small_file.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {
namespace fs = std::filesystem;

namespace {

bool is_interpreter(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0 && !is_script(path.string());
}

// The version names a pyenv version file lists: words, one or more per line, `#` comments.
std::vector<std::string> version_words(const fs::path& file) {
  std::string text = read_small_file(file);
  std::vector<std::string> found;
  for (auto line : lines(text))
    for (auto word : words(line.substr(0, line.find('#')))) found.emplace_back(word);
  return found;
}

// pyenv's own order: PYENV_VERSION, then .python-version from the working directory up, then
// the global $PYENV_ROOT/version.
std::vector<std::string> pyenv_versions(const fs::path& root) {
  if (const char* env = std::getenv("PYENV_VERSION"); env && *env) return split_search_path(env);
  std::error_code ec;
  for (fs::path dir = fs::current_path(ec); !ec && !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / ".python-version", ec)) return version_words(dir / ".python-version");
    if (dir == dir.root_path()) break;
  }
  return version_words(root / "version");
}

void refuse_script(const std::string& flag, const std::string& path) {
  throw UsageError(flag + " " + path +
                   " is a script, not an interpreter, and is never run on the host: pass the "
                   "interpreter itself, as printed by " +
                   path + " -c 'import sys; print(sys.executable)'");
}

}  // namespace

bool is_script(const std::string& path) {
  return read_small_file(path, 2) == "#!";
}

std::optional<std::string> pyenv_interpreter(const std::string& shim) {
  fs::path path(shim);
  fs::path shims = path.parent_path();
  fs::path root = shims.parent_path();
  std::error_code ec;
  if (shims.filename() != "shims" || !fs::is_directory(root / "versions", ec)) return std::nullopt;
  for (const auto& version : pyenv_versions(root)) {
    if (version == "system") return std::nullopt;
    if (version.empty() || version == "." || version == ".." ||
        version.find('/') != std::string::npos)
      continue;  // not a version name pyenv would accept; never a path out of versions/
    fs::path candidate = root / "versions" / version / "bin" / path.filename();
    if (is_interpreter(candidate)) return candidate.lexically_normal().string();
  }
  return std::nullopt;
}

std::string resolve_python(const std::string& flag, const std::string& text) {
  if (text.empty()) throw UsageError(flag + ": empty path");
  if (text.find('/') == std::string::npos) {
    const char* path_env = std::getenv("PATH");
    std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
    std::string script;
    for (const auto& dir : split_search_path(path)) {
      fs::path candidate = fs::path(dir) / text;
      if (dir.empty() || ::access(candidate.c_str(), X_OK) != 0) continue;
      std::string found = fs::absolute(candidate).lexically_normal().string();
      if (!is_script(found)) return found;
      if (auto real = pyenv_interpreter(found)) return *real;
      if (script.empty()) script = found;  // "system", or another wrapper: look further
    }
    if (!script.empty()) refuse_script(flag, script);  // only scripts: refused, naming one
    throw UsageError(flag + " " + text + ": not found on PATH");
  }
  fs::path path = fs::absolute(text);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0)
    throw UsageError(flag + " " + text + ": not an executable file");
  // Keep the name the user gave (a venv's bin/python must stay a venv python), only absolute.
  std::string given = path.lexically_normal().string();
  if (!is_script(given)) return given;
  if (auto real = pyenv_interpreter(given)) return *real;
  refuse_script(flag, given);
  return given;  // not reached
}

}  // namespace belljar
