#pragma once
// Loading the egress proxy (egress_service.hpp) when a kernel's policy needs it. The module is
// belljar-egress.so, found from the kernel's own path like the jail helper
// (kernel/command_line/resources.cpp) and checked the same way (sandbox/os/installed_file.hpp).
#include <memory>
#include <string>

#include "sandbox/egress_api/egress_service.hpp"

namespace belljar {

// Loads the module at `path` (once per process) and starts the proxy. Throws SetupError naming
// the module and the fix when it is missing or unfit, std::runtime_error with the proxy's own
// reason when it cannot start.
std::unique_ptr<EgressService> start_egress(const std::string& path, const EgressStart& start);

}  // namespace belljar
