#pragma once
// Where belljar's own files are: next to the build (build/../worker) or installed
// (bin/../share/belljar/...), with the source tree compiled in as the last resort.
#include <filesystem>

namespace belljar {

std::filesystem::path executable_path();
std::filesystem::path worker_package_dir();   // holds belljar_worker/
std::filesystem::path kernelspec_source_dir(); // holds the logos

}  // namespace belljar
