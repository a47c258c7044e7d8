// unit_tests is its own jail executable: WorkerProcess::start() runs `/proc/self/exe __jail`,
// which must reach jail_main() before Catch's main() sees the argument. A static initializer
// does it, whatever main.cpp holds.
#include "sandbox/jail/jail_entry.hpp"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct JailDispatch {
  JailDispatch() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::vector<std::string> args;
    std::string arg;
    while (std::getline(in, arg, '\0')) args.push_back(arg);
    if (args.size() < 2 || args[1] != belljar::kJailCommand) return;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::exit(belljar::jail_main(static_cast<int>(args.size()), argv.data()));
  }
} dispatch;

}  // namespace
