#include "sandbox/egress_api/egress_module.hpp"

#include <map>
#include <mutex>
#include <stdexcept>

#include "sandbox/os/installed_file.hpp"

namespace belljar {

namespace {
// A process loads each module path once: restarts and the tests' many kernels reuse it.
EgressEntryPoint entry_point(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, EgressEntryPoint> loaded;
  std::lock_guard lock(mutex);
  if (auto found = loaded.find(path); found != loaded.end()) return found->second;
  Fd file = open_installed_file(path, "the egress module", InstalledKind::module);
  auto entry = reinterpret_cast<EgressEntryPoint>(
      load_module_symbol(file, "the egress module " + path, kEgressEntryPoint));
  loaded.emplace(path, entry);
  return entry;
}
}  // namespace

std::unique_ptr<EgressService> start_egress(const std::string& path, const EgressStart& start) {
  EgressEntryPoint entry = entry_point(path);
  std::string error;
  std::unique_ptr<EgressService> service(entry(start, error));
  if (!service) throw std::runtime_error("the egress proxy could not start: " + error);
  return service;
}

}  // namespace belljar
