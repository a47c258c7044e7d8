#pragma once
// Where belljar's own files are, found from the executable's own path (never PATH, never the
// working directory): in a build tree beside the binary (build/worker, build/kernelspec, put
// there by the build), or installed (bin/../share/belljar/...). No source-tree path is compiled
// in, so an installed binary never reaches back into the checkout it was built from.
#include <filesystem>

namespace belljar {

std::filesystem::path executable_path();
std::filesystem::path worker_package_dir();     // holds belljar_worker/
std::filesystem::path kernelspec_source_dir();  // holds the logos

}  // namespace belljar
