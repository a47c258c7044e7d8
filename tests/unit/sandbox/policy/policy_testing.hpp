#pragma once
// What the policy tests share: a scratch file for --policy and friends, and the command line's
// way of feeding flags to a PolicyBuilder.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sandbox/policy/policy.hpp"

namespace belljar::testing {

// A file under /tmp holding `text`, named with `suffix`, removed at scope exit.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text, const char* suffix = ".json") {
    char name[] = "/tmp/belljar-policy-XXXXXX";
    int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    std::remove(name);
    path = std::string(name) + suffix;
    std::ofstream(path) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

// Feeds args through take() the way the command line does.
inline PolicyBuilder collect(const std::vector<std::string>& args) {
  PolicyBuilder builder;
  for (size_t i = 0; i < args.size();) {
    int used = builder.take(args, i);
    if (used == 0) throw std::logic_error("not a policy flag: " + args[i]);
    i += static_cast<size_t>(used);
  }
  return builder;
}

}  // namespace belljar::testing
