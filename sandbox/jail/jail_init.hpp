#pragma once
// The jail's init: pid 1 of the sandbox's pid namespace. It finishes the jail from the inside
// (identity, mounts, loopback), forks the worker, then reaps, forwards the warden's SIGINT,
// and reports how the worker ended. When it exits, the kernel kills the whole namespace.
#include <vector>

#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox/layers/mounts.hpp"
#include "sandbox/layers/workspace_guard.hpp"

namespace belljar {

// The go-ahead byte from the warden: which session caps a cgroup already enforces or counts.
inline constexpr unsigned char kGoMemoryCgroup = 1;
inline constexpr unsigned char kGoPidsCgroup = 2;
inline constexpr unsigned char kGoCpuCgroup = 4;  // without it: SeccompOptions::cpu_by_process_tree

struct InitChannels {
  int go = -1;      // read end; one byte of kGo* flags once the maps and cgroups are in place
  int report = -1;  // write end; reports (jail_reports.hpp) to the warden: ready / error / exit
  int broker = -1;  // the worker sends its filter's listener to the warden's broker on it
};

// Runs in the child of the warden's clone(); never returns.
[[noreturn]] void run_jail_init(const JailSpec& spec, std::vector<BindTree> trees,
                                const std::vector<GuardedPath>& guards,
                                InitChannels channels) noexcept;

}  // namespace belljar
