#pragma once
// The command line contract (README.md, "Command line"): belljar kernel | install | run | mcp |
// check.
#include <optional>
#include <string>
#include <vector>

#include "sandbox/policy/policy.hpp"

namespace belljar {

struct CommandLine {
  std::string command;          // kernel, install, run, mcp, check, help, version, flags-markdown
  std::string connection_file;  // kernel -f
  // install
  enum class Scope { default_, user, sys_prefix, prefix } scope = Scope::default_;
  std::string prefix;
  std::string name = "belljar";
  std::string display_name = "Python 3 (belljar)";
  // run
  std::optional<std::string> run_file;  // "-" is stdin
  std::optional<std::string> run_code;  // -c
  bool json_output = false;
  PolicyBuilder policy;
};

// Throws UsageError (one line, exit 2) on anything it doesn't understand.
CommandLine parse_command_line(const std::vector<std::string>& args);
std::string usage_text();

}  // namespace belljar
