#pragma once
// The jail's root filesystem: an empty tmpfs, then only what is bound into it (bubblewrap's
// "start from nothing and add"), then pivot_root into it.
#include <string>
#include <vector>

#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

struct BindTree {
  JailBind bind;
  Fd tree;  // a detached copy of the source (open_tree(OPEN_TREE_CLONE)), attributes set
  bool directory = true;
};

// Detached copies of every bind source with their final attributes: read-only, nosuid, nodev
// (devices keep dev), the workspace read-write and idmapped through `idmap_userns` when that
// is a valid fd. The caller opens the sources with its own credentials and needs
// CAP_SYS_ADMIN over its mount namespace: the root warden on the host, or the unprivileged
// jail's init before it replaces its root. A failed idmap is an error when spec.strict, else
// a note.
std::vector<BindTree> clone_bind_sources(const JailSpec& spec, int idmap_userns,
                                         std::vector<std::string>& notes);

// Builds the sandbox's root from the trees and switches to it with pivot_root. Runs in init:
// pid 1 of the new pid namespace (so the fresh /proc is the sandbox's own), inside the new
// mount namespace, while the host's root is still visible (for the proc mount's checks).
void assemble_root(const JailSpec& spec, std::vector<BindTree>& trees,
                   const std::vector<GuardedPath>& guards);

// Mounts each guard below `workspace` (a directory fd): secrets get the empty, unreadable
// "mask-file"/"mask-dir" of `mask_source`, host-run files a read-only copy of themselves.
// Paths that vanished or became symlinks since the survey are skipped. Returns those applied.
std::vector<std::string> apply_guards(int workspace, int mask_source,
                                      const std::vector<GuardedPath>& guards,
                                      const std::string& shown);
// A detached tmpfs holding the empty mode-0 "mask-file" and "mask-dir" (for guards added after
// the root was built).
Fd make_mask_source();
// The workspace as this mount namespace shows it, reached without following symlinks.
Fd open_jail_workspace(const std::string& workspace);
// The workspace mount (at its own path in this mount namespace) made read-only or writable
// again: what --workspace-quota does once the session has written its budget.
void set_workspace_read_only(const std::string& workspace, bool read_only);

}  // namespace belljar
