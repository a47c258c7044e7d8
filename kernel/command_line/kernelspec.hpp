#pragma once
// `belljar install`: a kernelspec directory with kernel.json (policy flags baked into argv)
// and the logos, where `jupyter kernelspec list` finds it.
#include <filesystem>

#include "kernel/command_line/command_line.hpp"

namespace belljar {

// Returns the directory written.
std::filesystem::path install_kernelspec(const CommandLine& cl);

}  // namespace belljar
