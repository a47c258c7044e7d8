#pragma once
// The workspace broker: a thread of the warden, outside the sandbox, that decides every change
// to a name before it happens. The worker's seccomp filter (seccomp_filter.hpp, `broker`) stops
// each call that makes, renames, removes, re-modes or re-times a name, and each open that may
// write (syscall_table.hpp says which; extended attributes are refused there outright); the
// broker reads the call's paths from the caller's memory once, resolves them itself in the
// sandbox's root (sandbox_paths.hpp: component by component, no symlink followed blindly),
// asks the judge (workspace_judge.hpp: the rule of workspace_rule.hpp and what is on disk) about
// the result, and then makes the change itself through the descriptors it resolved, handing an
// opened file back with SECCOMP_ADDFD_FLAG_SEND. One handler per call does this, dispatched from
// a table (broker_handlers.hpp) that is the list of what is brokered and why. The caller's
// memory may change after it was read without effect: the check and the change are both the
// broker's, on the same descriptors. A descriptor the caller already holds, opened again
// (/proc/self/fd/N, /dev/stderr), is the same: the broker takes hold of the object once and
// decides on what it holds (`Reopenable` in broker_handlers.cpp lists what may be), so a
// descriptor swapped by another thread meanwhile is never the one handed back. A refusal is
// EACCES (EPERM for a mode, times or a link) in the cell and one record per path for the
// supervisor (a notice and an audit record).
//
// Removing a regular file's last name in the workspace, or renaming over it, while another
// open file description of it remains (a descriptor in flight in a unix socket, a mapping)
// would leave bytes the quota's survey cannot see: in strict mode the broker moves such a file
// into the morgue instead (BrokerSettings::morgue); the caller sees the name gone.
//
// Reads and writes of open files never reach it: the cost is on names, not on data. What it
// costs is the session's: its thread is named kBrokerThreadName (tests find it so), and the
// supervisor adds the warden's own CPU, this thread's among it, to the sandbox's
// (WorkerProcess::cpu_seconds), so --cpu bounds a cell, or a
// thread left running between cells, that keeps the broker busy (a long a/../a/.. path).
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/jail/broker_call.hpp"
#include "sandbox/jail/sandbox_mounts.hpp"
#include "sandbox/jail/workspace_judge.hpp"
#include "sandbox/jail_protocol/jail_reports.hpp"
#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox/layers/held_names.hpp"
#include "sandbox/layers/workspace_rule.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

struct BrokerSettings {
  std::string workspace;  // its path inside the sandbox (the same as on the host)
  WorkspaceRule rule;
  // Where the worker may write at all, as paths inside the sandbox: names are made below them,
  // and a root itself (a device bound there) may only be opened for writing. Everything else
  // is refused before the broker touches it, whatever the sandbox's mounts say: the broker's
  // credentials are not the worker's (a /proc/sys file the worker could never write, the
  // warden could).
  std::vector<std::string> writable_roots;
  // As host root, the broker makes its changes as the sandbox's host identity (its thread's
  // fsuid/fsgid), so they land owned as the worker's own would and with the worker's rights.
  bool switch_ids = false;
  uid_t host_uid = 0;
  gid_t host_gid = 0;
  // The ids the worker knows itself by (chown's arguments): kSandboxUid inside namespaces,
  // the host's in Landlock mode.
  uid_t sandbox_uid = 0;
  gid_t sandbox_gid = 0;
  // Strict mode: the morgue (kMorgueName) as it lies on the jail's workspace mount, under the
  // mask the sandbox sees there (workspace_watch.hpp, hold_morgue). A regular file's last name
  // goes only when the broker's write lease shows nobody else holds it; otherwise the file is
  // moved here, where the quota's survey still counts it (workspace_rule.hpp, removal_of).
  // None (degraded mode): names are removed as asked.
  Fd morgue;
  // Strict mode: a regular file's last name is removed only under the lease, also when there is
  // no morgue (a workspace whose top the start could not write): a held file's is then refused
  // (EBUSY), never removed uncounted.
  bool guard_last_names = false;
  // Degraded mode, where no guard is mounted over a link's target: a change reached through a
  // link whose own name the rule closes is refused as that name's (workspace_judge.hpp).
  bool links_by_name = false;
  // The names on protected links' ways as the first survey found them (held_names.hpp); each
  // later survey's replace them (WorkspaceBroker::hold).
  HeldNames held;
};

// Degraded mode, where no mount makes them read-only: the --ro parts inside the workspace
// (`binds` of kind read_only below `workspace`) as anchored protect patterns ("/ref"), so the
// rule closes them and everything below them.
std::vector<std::string> read_only_patterns(const std::vector<JailBind>& binds,
                                            const std::string& workspace);

struct BrokerMemory;  // what answers keep between calls (broker_handlers.hpp)

class WorkspaceBroker {
 public:
  // Called on the broker's thread for each path's first refusal, before the refused call
  // returns: what the warden sends on, so the refusal is on record before the cell goes on.
  using OnRefusal = std::function<void(const BrokerRefusal&)>;

  // Takes the filter's listener and starts answering on a thread of its own.
  WorkspaceBroker(Fd listener, BrokerSettings settings, OnRefusal on_refusal);
  ~WorkspaceBroker();
  WorkspaceBroker(const WorkspaceBroker&) = delete;
  WorkspaceBroker& operator=(const WorkspaceBroker&) = delete;

  // A survey is about to mount guards: the broker reads the sandbox's mount list for each move
  // it weighs until invalidate() (any thread).
  void surveying() { mount_changes_.surveying(); }
  // Folders located before may have moved under a mount, or become an environment, and the
  // sandbox's mounts may be new: the warden says so after each survey (any thread).
  void invalidate() {
    ++generation_;
    mount_changes_.surveyed();
  }
  // The names on protected links' ways, as a survey found them (held_names.hpp): each call
  // from now on is judged with them (any thread).
  void hold(HeldNames held);

 private:
  void serve();
  void answer(BrokerCall& call);
  void refuse_once(BrokerRefusal refusal);

  Fd listener_;
  Fd stop_;  // an eventfd: the destructor's word
  BrokerSettings settings_;
  std::vector<std::string> workspace_parts_;
  std::vector<std::vector<std::string>> writable_roots_;
  Fd root_;  // the sandbox's root, from the first caller's /proc/PID/root
  std::unique_ptr<BrokerMemory> memory_;  // the broker's thread's alone
  OnRefusal on_refusal_;
  std::atomic<uint64_t> generation_{0};
  MountChanges mount_changes_;
  std::mutex held_mutex_;
  std::shared_ptr<const HeldNames> held_;  // replaced whole by hold(); each call keeps its own
  bool own_umask_ = false;  // the broker's thread has a umask of its own (unshare(CLONE_FS))
  std::set<std::string> reported_;  // paths said once (bounded); the broker's thread's alone
  std::thread thread_;
};

}  // namespace belljar
