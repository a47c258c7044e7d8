#include "sandbox/jail_client/jail_helper.hpp"

#include "sandbox/jail_client/worker_process.hpp"
#include "sandbox/os/installed_file.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

std::shared_ptr<const JailHelper> JailHelper::open(const std::filesystem::path& path) {
  try {
    Fd fd = open_installed_file(path.string(), "the jail helper", InstalledKind::executable);
    return std::shared_ptr<const JailHelper>(new JailHelper(std::move(fd), path.string()));
  } catch (const SetupError& e) {
    throw SandboxError(e.what());
  }
}

}  // namespace belljar
