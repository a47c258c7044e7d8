#pragma once
// The workspace broker's dispatch table (workspace_broker.hpp): one handler per system call the
// worker's seccomp filter hands it, each reading the call's arguments once, resolving its paths
// in the sandbox's root (sandbox_paths.hpp), asking the judge (workspace_judge.hpp), and making
// the change itself through the descriptors it resolved. The table is the complete list of
// brokered calls: the filter's list (seccomp_filter.hpp, brokered_syscalls, from
// syscall_table.hpp) and docs/security.md's "What the broker admits, call by call" must name the
// same calls (tests/unit/sandbox/layers/broker_calls.cpp), and a call the filter hands over
// that has no row here is refused (ENOSYS), never let run.
//
// Threat: a handler is where the cell's arguments meet the host's filesystem with the warden's
// credentials. Each handler sees only its BrokerAnswer: the call, the judge, the caller's paths,
// and what the broker keeps between calls (BrokerMemory); it checks the caller is still waiting
// after everything it read or opened on the caller's behalf and before it changes anything (a
// pid may be reused once its caller is gone).
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/jail/broker_call.hpp"
#include "sandbox/jail/located_folders.hpp"
#include "sandbox/jail/sandbox_mounts.hpp"
#include "sandbox/jail/sandbox_paths.hpp"
#include "sandbox/jail/workspace_broker.hpp"
#include "sandbox/jail/workspace_judge.hpp"

namespace belljar {

// The callers' umask. Only /proc/TID/status says a thread's umask, and rendering it is the
// costliest step of a brokered create, so it is read once: every process under the filter
// descends from the worker and inherits its umask, and only umask() changes one, which is
// notified too. Once any thread of the sandbox calls it, nothing is kept any more (the call
// takes effect after the broker lets it run, so a value read meanwhile could be stale), and
// each caller's own is read. Python and its libraries rarely call it; pip does, once per
// install.
class Umasks {
 public:
  mode_t of(pid_t tid);
  void changing() {
    caching_ = false;
    known_.reset();
  }

 private:
  std::optional<mode_t> known_;
  bool caching_ = true;
};

// What answers keep between calls; the broker's thread's alone.
struct BrokerMemory {
  LocatedFolders located;
  Umasks umasks;
  uint64_t buried = 0;   // files moved to the morgue: each one's name there
  SandboxMounts mounts;  // the sandbox's mount list, read when a survey may have changed it
};

// The sandbox as the broker sees it, fixed for its life: what a handler reads but never changes.
struct BrokerScene {
  const BrokerSettings& settings;
  const std::vector<std::string>& workspace;           // components from the sandbox's root
  const std::vector<std::vector<std::string>>& roots;  // where the worker may write at all
  int root;                                            // the sandbox's root folder
  bool own_umask;         // the broker's thread has a umask of its own (unshare(CLONE_FS))
  const HeldNames* held;  // the names on protected links' ways, as this call found them
};

// One call's answer in the making: everything a handler may touch.
class BrokerAnswer {
 public:
  BrokerAnswer(BrokerCall& call, const BrokerScene& scene, BrokerMemory& memory,
               std::atomic<uint64_t>& generation, const MountChanges& mount_changes,
               WorkspaceJudge::Refuse refuse);

  BrokerCall& call;
  const BrokerScene& scene;
  BrokerMemory& memory;
  WorkspaceJudge judge;

  // The caller's pid may have been reused once it went: every path read and descriptor opened
  // is checked against the call still waiting before anything is changed.
  bool gone() const { return !call.still_waiting(); }
  // Folders located before may have moved, or become an environment: forget them.
  void invalidate() { ++generation_; }

  // Resolves the path at `address` in the caller's memory, relative to `dirfd` (AT_FDCWD: the
  // caller's cwd). 0 or the errno the kernel would give.
  int resolve(int dirfd, uint64_t address, bool follow_last, WalkedPath& out);
  // The same for a path already read (a unix socket's, from its sockaddr).
  int resolve_text(int dirfd, const std::string& path, bool follow_last, WalkedPath& out);
  // The name of an object the broker holds (`held`, any descriptor of it): its /proc/self/fd
  // text walked from the sandbox's root, only when that walk leads to the very same object (a
  // file since renamed or unlinked, or one outside this root, has none).
  bool name_of(int held, WalkedPath& at) const;
  // The sandbox's mount list, read from the caller's /proc/PID/mountinfo when a survey may have
  // changed it since; null when it cannot be read, or the caller went meanwhile.
  const SandboxMounts* current_mounts();

 private:
  std::atomic<uint64_t>& generation_;
  const MountChanges& mount_changes_;
  uint64_t seen_generation_;
  SandboxPaths paths_;
};

using BrokerHandler = void (*)(BrokerAnswer&);

struct BrokeredCall {
  const char* name;  // as syscall_table.hpp names it
  BrokerHandler handle;
  const char* why;  // what the broker does with it, and why it must be the broker's
};

// The dispatch table: every brokered call, once.
const std::vector<BrokeredCall>& brokered_calls();

}  // namespace belljar
