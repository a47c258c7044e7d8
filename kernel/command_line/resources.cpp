#include "kernel/command_line/resources.hpp"

#include <unistd.h>

#include <array>

#include "sandbox/jail_client/jail_helper.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {
namespace fs = std::filesystem;

fs::path executable_path() {
  std::error_code ec;
  fs::path path = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw UsageError("cannot find the belljar executable: " + ec.message());
  return path;
}

namespace {
fs::path first_existing(const fs::path& name, const fs::path& marker) {
  fs::path bin = executable_path().parent_path();
  for (const fs::path& candidate : {bin / name, bin.parent_path() / "share/belljar" / name}) {
    std::error_code ec;
    if (fs::exists(candidate / marker, ec)) return fs::weakly_canonical(candidate, ec);
  }
  throw UsageError("cannot find " + name.string() + " beside " + bin.string() + " or in " +
                   (bin.parent_path() / "share/belljar").string());
}
}  // namespace

fs::path worker_package_dir() {
  return first_existing("worker", "belljar_worker/main.py");
}

fs::path kernelspec_source_dir() {
  return first_existing("kernelspec", "logo-64x64.png");
}

namespace {
// belljar's own executables and modules: beside the binary in a build tree, in
// <prefix>/libexec/belljar once installed.
std::array<fs::path, 2> libexec_candidates(const std::string& name) {
  fs::path bin = executable_path().parent_path();
  return {bin / name, bin.parent_path() / "libexec/belljar" / name};
}
fs::path first_present(const std::array<fs::path, 2>& candidates) {
  for (const fs::path& candidate : candidates)
    if (::access(candidate.c_str(), F_OK) == 0) return candidate;
  return {};
}
}  // namespace

fs::path jail_helper_path() {
  auto candidates = libexec_candidates("belljar-jail");
  fs::path found = first_present(candidates);
  if (found.empty())
    throw SandboxError("the jail helper belljar-jail is neither at " + candidates[0].string() +
                       " nor at " + candidates[1].string() +
                       ": it is built and installed with belljar (cmake --install)");
  return found;
}

namespace {
fs::path module_path(const std::string& name) {
  auto candidates = libexec_candidates(name);
  fs::path found = first_present(candidates);
  return found.empty() ? candidates[1] : found;
}
}  // namespace

fs::path egress_module_path() {
  return module_path("belljar-egress.so");
}

fs::path gateway_module_path() {
  return module_path("belljar-gateway.so");
}

WorkerLaunch worker_launch(const Policy& policy) {
  WorkerLaunch launch{policy.python, worker_package_dir()};
  if (policy.isolation != Isolation::none)
    launch.jail_helper = JailHelper::open(jail_helper_path());
  return launch;
}

}  // namespace belljar
