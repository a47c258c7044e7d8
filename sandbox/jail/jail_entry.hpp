#pragma once
// The jail's own processes are this same executable, re-run as `belljar __jail ...` from the
// supervisor's fork, so no jail setup ever runs in the multi-threaded supervisor.
namespace belljar {

inline constexpr const char* kJailCommand = "__jail";

// main() calls this when argv[1] == kJailCommand; it never returns into the caller's logic.
int jail_main(int argc, char** argv);

}  // namespace belljar
