#include "kernel/resources.hpp"

#include "sandbox/policy.hpp"

namespace belljar {
namespace fs = std::filesystem;

fs::path executable_path() {
  std::error_code ec;
  fs::path path = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw UsageError("cannot find the belljar executable: " + ec.message());
  return path;
}

namespace {
fs::path first_existing(const fs::path& relative_from_prefix, const fs::path& in_source,
                        const fs::path& marker) {
  fs::path bin = executable_path().parent_path();
  for (const fs::path& candidate : {bin.parent_path() / in_source, bin.parent_path() / relative_from_prefix,
                                    fs::path(BELLJAR_SOURCE_DIR) / in_source}) {
    std::error_code ec;
    if (fs::exists(candidate / marker, ec)) return fs::weakly_canonical(candidate, ec);
  }
  throw UsageError("cannot find " + in_source.string() + " next to " + bin.string());
}
}  // namespace

fs::path worker_package_dir() {
  return first_existing("share/belljar/worker", "worker", "belljar_worker/main.py");
}

fs::path kernelspec_source_dir() {
  return first_existing("share/belljar/kernelspec", "kernelspec", "logo-64x64.png");
}

}  // namespace belljar
