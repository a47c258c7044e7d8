#pragma once
// User namespaces: the sandbox's uid/gid maps and the user namespaces that idmapped mounts
// borrow their mapping from.
#include <sys/types.h>

#include "sandbox/os/fd.hpp"

namespace belljar {

// Maps inside_uid -> outside_uid (one id) in the user namespace of `pid`, likewise for gids.
// deny_setgroups is required when the writer is unprivileged. Throws SetupError naming the file.
void write_id_maps(pid_t pid, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid,
                   gid_t outside_gid, bool deny_setgroups);

// A user namespace (as an fd) for MOUNT_ATTR_IDMAP: through a mount idmapped with it, files
// owned on disk by on_disk_uid appear owned by shown_uid, and files that shown_uid creates
// land on disk as on_disk_uid. Needs the privilege to write such maps (host root).
Fd make_idmap_userns(uid_t on_disk_uid, uid_t shown_uid, gid_t on_disk_gid, gid_t shown_gid);

}  // namespace belljar
