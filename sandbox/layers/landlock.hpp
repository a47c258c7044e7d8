#pragma once
// Landlock, the degraded mode's filesystem layer: without a mount namespace, the worker is
// limited to reading the system and writing only its workspace and /tmp.
#include <string>
#include <vector>

namespace belljar {

// The kernel's Landlock ABI version; 0 when Landlock is unavailable or disabled.
int landlock_abi();

struct LandlockRules {
  std::vector<std::string> read_only;   // read and execute
  std::vector<std::string> read_write;  // everything, under these
};

// Restricts the calling process and its future children. Paths that do not exist are skipped.
// Where the kernel offers them, also: no TCP bind/connect (ABI 4), and no signals or abstract
// unix sockets reaching outside the sandbox (ABI 6). Throws SetupError.
void restrict_filesystem(const LandlockRules& rules);

}  // namespace belljar
