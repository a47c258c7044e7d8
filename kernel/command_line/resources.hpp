#pragma once
// Where belljar's own files are, found from the executable's own path (never PATH, never the
// working directory): in a build tree beside the binary (build/worker, build/kernelspec,
// build/belljar-jail, put there by the build), or installed (bin/../share/belljar/...,
// bin/../libexec/belljar/belljar-jail). No source-tree path is compiled in, so an installed
// binary never reaches back into the checkout it was built from.
#include <filesystem>

#include "sandbox/jail_client/worker_process.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

std::filesystem::path executable_path();
std::filesystem::path worker_package_dir();     // holds belljar_worker/
std::filesystem::path kernelspec_source_dir();  // holds the logos
std::filesystem::path jail_helper_path();       // belljar-jail, the sandbox's process tree

// What every front door starts its workers with: the policy's interpreter, the worker package
// and (unless --isolation none) the jail helper, opened and checked now (jail_helper.hpp).
WorkerLaunch worker_launch(const Policy& policy);

}  // namespace belljar
