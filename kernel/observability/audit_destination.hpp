#pragma once
// Where a kernel's audit records go, decided once at start. Given no --audit-log, a file of its
// own in the user's state directory ($XDG_STATE_HOME/belljar, else ~/.local/state/belljar):
// the kernel's stderr is the Jupyter server's terminal, and clients that run kernels read it
// expecting warnings only (nbclient's parallel runs fail on a line per cell). `--audit-log -`
// is stderr, as before; a named file is refused where the sandbox can write (host_files.hpp).
// A file per kernel, not one shared file: each is finished when its kernel exits, so it can be
// kept or pruned whole (belljar never deletes one) without renaming a file other kernels hold
// open, and it reads as one kernel's story without filtering. The name carries the start time
// and the records' `kernel` field: audit-20250102T030405Z-<kernel>.jsonl.
// The threat: the state directory may lie where the sandbox can write (a workspace that is the
// home directory; /tmp in degraded mode). There a cell could plant a symlink that leads the next
// kernel's log elsewhere, or replace or read the file. So the directory is located as opened
// (symlinks the user made are followed, the ones it makes are not) and refused there, as one the
// kernel cannot own alone (another user's, or writable by others). Refused, or with no state
// directory at all (HOME unset or unwritable), the records go to stderr and one warning says
// why: never lost, never redirected.
#include <functional>
#include <string>
#include <vector>

#include "sandbox/os/fd.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

using Getenv = std::function<const char*(const char*)>;

// The user's state directory for belljar, as the environment names it: `existing` must be there
// already (the home itself is never made), `made` are the names below it created when missing.
struct StateDirectory {
  std::string existing;
  std::vector<std::string> made;
  std::string unusable;  // why the environment names none ("HOME is not set"); empty if it does
  std::string path() const;
};

// $XDG_STATE_HOME/belljar when XDG_STATE_HOME is an absolute path (the XDG spec ignores a
// relative one), else $HOME/.local/state/belljar.
StateDirectory state_directory(const Getenv& getenv);

// The log's place: a file opened for appending, or stderr.
struct AuditDestination {
  Fd file;               // empty: stderr
  std::string name;      // the path, or "stderr", as the banner says it
  std::string fallback;  // why the state directory was not used; empty when it was, or not asked
};

// For `policy.audit_log`: "-" is stderr; a path is checked and opened (UsageError when refused);
// empty is a fresh file for `kernel_id` in the state directory, or stderr with `fallback` set.
AuditDestination open_audit_destination(const Policy& policy, const std::string& kernel_id,
                                        const Getenv& getenv);

// The one warning line a fallback earns: where the records go instead, why, and the fix.
std::string fallback_warning(const std::string& why);

// What `belljar check` says: where a kernel with this policy would write its log (the state
// directory is made, as a kernel would make it; no log file is).
std::string describe_audit_destination(const Policy& policy, const Getenv& getenv);

}  // namespace belljar
