#pragma once
// Every environment variable the kernel reads (the supervisor; the jail helper is exec'd with
// an empty environment and reads none), and what each may change: the one list of them
// (docs/security.md, "What the environment may change"). Whatever can put a variable into a
// kernel's environment (a server's, a spawner's or a gateway's configuration) is not the
// kernelspec, so no variable here may weaken the sandbox or the policy: each one says where
// files go, what a value is masked as, when the kernel ends, or is read by `belljar launch` in
// a pod, whose kernelspec's env is the gateway's channel for the policy flags. A switch that
// weakens a layer is a policy flag (visible in the kernelspec's argv, the banner and
// kernel_info), never a variable. tests/unit/sandbox/policy/environment_reads.cpp scans the
// sources for every getenv and environ read and fails on one this table does not hold.
#include <span>
#include <string_view>

namespace belljar {

struct EnvironmentRead {
  // The variable, or "*" for the whole environment read as a list (environ).
  std::string_view name;
  // The source file that reads it, from the repository's root.
  std::string_view reader;
  // What its value may change.
  std::string_view changes;
  // Whether it may change the policy (the sandbox's flags). Only BELLJAR_POLICY_FLAGS does, in
  // `belljar launch` only.
  bool policy = false;
};

std::span<const EnvironmentRead> environment_reads();

}  // namespace belljar
