#pragma once
// Where belljar's own files are, found from the executable's own path (never PATH, never the
// working directory): in a build tree beside the binary (build/worker, build/kernelspec,
// build/belljar-jail, build/belljar-*.so, put there by the build), or installed
// (bin/../share/belljar/..., bin/../libexec/belljar/). No source-tree path is compiled in, so an
// installed binary never reaches back into the checkout it was built from.
#include <filesystem>

#include "sandbox/jail_client/worker_process.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

std::filesystem::path executable_path();
std::filesystem::path worker_package_dir();     // holds belljar_worker/
std::filesystem::path kernelspec_source_dir();  // holds the logos
std::filesystem::path jail_helper_path();       // belljar-jail, the sandbox's process tree
// belljar-egress.so, the egress proxy (sandbox/egress_api/egress_module.hpp): where it is, or
// where an install puts it when it is nowhere (the kernel that needs it names that path).
std::filesystem::path egress_module_path();
// belljar-gateway.so, the connection info's sealing for `belljar launch`, the same way.
std::filesystem::path gateway_module_path();

// What every front door starts its workers with: the policy's interpreter, the worker package
// and (unless --isolation none) the jail helper, opened and checked now (jail_helper.hpp).
WorkerLaunch worker_launch(const Policy& policy);

}  // namespace belljar
