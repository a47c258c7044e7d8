#include "kernel/command_line/kernelspec.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernel/command_line/resources.hpp"
#include "sandbox/jail/python_layout.hpp"
#include "sandbox/jail/worker_process.hpp"

namespace belljar {
namespace fs = std::filesystem;

namespace {
fs::path jupyter_data_dir() {
  if (const char* dir = std::getenv("JUPYTER_DATA_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) return fs::path(xdg) / "jupyter";
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw UsageError("--user: HOME is not set");
  return fs::path(home) / ".local/share/jupyter";
}

// The interpreter's sys.prefix, read from its files as CPython's getpath would (a venv's own
// directory, else the installation's prefix): the interpreter is never run on the host.
fs::path python_prefix(const std::string& python) {
  PythonLayout layout;
  try {
    layout = locate_python(python);
  } catch (const SandboxError& e) {
    throw UsageError(std::string("--sys-prefix: ") + e.what());
  }
  if (layout.prefixes.empty())
    throw UsageError("--sys-prefix: no installation prefix found for " + python);
  return layout.prefixes.front();
}
}  // namespace

fs::path install_kernelspec(const CommandLine& cl) {
  Policy policy = cl.policy.build();  // validates everything before anything is written
  fs::path kernels;
  switch (cl.scope) {
    case CommandLine::Scope::user:
      kernels = jupyter_data_dir() / "kernels";
      break;
    case CommandLine::Scope::sys_prefix:
      kernels = python_prefix(policy.python) / "share/jupyter/kernels";
      break;
    case CommandLine::Scope::prefix:
      kernels = fs::absolute(cl.prefix) / "share/jupyter/kernels";
      break;
    case CommandLine::Scope::default_:
      kernels = ::geteuid() == 0 ? fs::path("/usr/local/share/jupyter/kernels")
                                 : jupyter_data_dir() / "kernels";
  }
  fs::path dir = kernels / cl.name;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UsageError("cannot create " + dir.string() + ": " + ec.message());

  std::vector<std::string> argv = {executable_path().string(), "kernel", "-f", "{connection_file}"};
  // The flags as given, and the defaults install resolves (the python on PATH) so the kernel
  // runs the interpreter the user installed it for.
  for (auto& arg : cl.policy.kernel_argv(policy)) argv.push_back(std::move(arg));
  nlohmann::json spec = {
      {"argv", argv},
      {"display_name", cl.display_name},
      {"language", "python"},
      {"interrupt_mode", "message"},
      {"metadata",
       {{"debugger", false},
        {"belljar",
         {{"version", BELLJAR_VERSION}, {"isolation", isolation_name(policy.isolation)}}}}}};
  std::ofstream out(dir / "kernel.json");
  out << spec.dump(2) << "\n";
  if (!out) throw UsageError("cannot write " + (dir / "kernel.json").string());
  fs::path logos = kernelspec_source_dir();
  for (const char* logo : {"logo-32x32.png", "logo-64x64.png", "logo-svg.svg"}) {
    if (!fs::exists(logos / logo)) continue;
    fs::copy_file(logos / logo, dir / logo, fs::copy_options::overwrite_existing, ec);
    if (ec) throw UsageError("cannot copy " + std::string(logo) + ": " + ec.message());
  }
  return dir;
}

}  // namespace belljar
