#include "kernel/command_line/resources.hpp"

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

}  // namespace belljar
