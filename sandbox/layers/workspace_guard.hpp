#pragma once
// What code in the sandbox may not read or change in its own workspace, found by one walk of
// it, and how much the workspace holds:
//   - secrets (.env, .ssh, *.pem, --hide ...) are masked: an empty, unreadable file or
//     directory is mounted over each, so the host copy is untouched;
//   - files that host tools execute or obey (.git, .envrc, .vscode, shell start-up files,
//     --protect ...) are mounted read-only over themselves: the sandbox's writable area is also
//     the user's working copy, and a hook planted in .git would run on the host at the user's
//     next `git status`;
//   - the bytes and entries it holds, for --workspace-quota, the morgue's (kMorgueName: files
//     removed while still open) included, though it is masked.
// The walk fails closed: a directory it cannot read, or one nested deeper than kMaxDepth, is
// masked whole rather than trusted; more guarded paths than kMaxGuards collapse into their
// top-level directories rather than failing every start; more than kMaxGuards of those still
// refuse a start, and the session can make none of them (workspace_rule.hpp closes every name
// the walk would guard). It runs at every start and, through
// the warden, before every cell and on a timer (files appear on the host while a kernel runs).
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sandbox/jail_protocol/jail_reports.hpp"
#include "sandbox/layers/held_names.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

inline constexpr size_t kMaxDepth = 128;    // directories below the workspace
inline constexpr size_t kMaxGuards = 2048;  // mounts one survey may ask for
// Where the broker (strict mode) moves a file whose last name the sandbox removes while some
// open file description of it remains (workspace_rule.hpp, removal_of): at the workspace's
// top, made and emptied by the warden (workspace_watch.hpp), masked inside the jail, closed to
// every name change, and counted by the survey like any folder, though masked.
inline constexpr const char* kMorgueName = ".belljar-morgue";

// Pattern rules: "NAME-GLOB" matches an entry of that name anywhere ("*.pem", ".env.*");
// "a/b" matches entries whose last path components match ("docker/config.json" inside any
// ".docker"); a leading "/" anchors at the workspace root ("/data/private").
bool matches_hide_pattern(const std::string& pattern, const std::string& relative);

struct GuardedPath {
  std::string relative;  // path inside the workspace
  bool directory = false;
  GuardKind kind = GuardKind::mask;
  std::string reason;  // the pattern it matched, "unreadable", "nested too deep", ...
};

struct WorkspaceRules {
  std::vector<std::string> hide;     // masked: defaults + --hide
  std::vector<std::string> protect;  // read-only: defaults + --protect, less --writable
  // --writable: what the broker's rule opens. A name the rule closes anyway (a dot-path) is not
  // held again, so a home's thousands of links inside its dot-folders cost no held names.
  std::vector<std::string> writable;
  bool measure = false;  // also sum the bytes (one stat per file)
};

struct WorkspaceSurvey {
  std::vector<GuardedPath> guards;  // parents before children
  HeldNames held;                   // the names on protected links' ways (held_names.hpp)
  uint64_t bytes = 0;               // allocated bytes of everything not masked
  uint64_t entries = 0;
};

// Walks the workspace (never following symlinks). A matching symlink, and each symlink below a
// matching folder, is followed on the host: every name on its way inside the workspace is held
// (held_names.hpp), and where it ends inside the workspace, if that exists, is guarded as the
// link (outside, it resolves inside the jail's root, where host files do not exist). Throws
// SetupError only when the workspace itself can't be read, or the guards or held names can't be
// bounded.
WorkspaceSurvey survey_workspace(const std::string& workspace, const WorkspaceRules& rules);

// The write lease a last name's removal asks for (workspace_rule.hpp, removal_of) on the file
// `name` in `dir`, taken on a descriptor opened for writing (`held`), so that the file's bytes
// can be dropped (drop_bytes) before the name goes: an O_PATH descriptor, which no lease sees,
// or a reader's open that waited out the lease, keeps the inode of a removed file alive, and its
// blocks with it, counted by no survey (the outside attack on round three pinned 96 MiB under a
// 32M quota). A file without its owner's write bit gets it first (the caller may remove it). 0
// when granted; else the errno, which the caller treats as held.
int take_removal_lease(int dir, const char* name, Fd& held);
// The file's bytes freed, while the lease is held: what an O_PATH descriptor keeps is empty.
// Whether it was done (else the caller keeps the name or buries the file).
bool drop_bytes(int held);

// One warden's folder in the morgue, from the workspace's top: kernels share a workspace (a
// folder of notebooks), so each holds a folder of its own, `name` (its warden's pid and a random
// part: wardens in other pid namespaces share pids), locked (flock) while it lives. A start,
// and a supervisor whose warden is gone, remove the unlocked ones (remove_dead_morgues).
std::string morgue_folder(const std::string& name);
// Empties and removes every folder of the morgue (`morgue`, its folder) no live warden locks,
// but `except`.
void remove_dead_morgues(int morgue, const std::string& except);

// The morgue's files (`morgue`, its folder): with `unheld_only`, those a write lease shows
// nobody else holds open (no other open file description: workspace_rule.hpp, removal_of),
// removed while the lease is held; else every one.
void empty_morgue(int morgue, bool unheld_only);
// The same for the folder `name` of the morgue below `workspace`, if it is there; without
// `unheld_only` that folder goes too, and the morgue if no other kernel's is left.
void sweep_morgue(const std::string& workspace, const std::string& name, bool unheld_only);
// The session is over (the supervisor, after it killed the sandbox): every unlocked folder of
// the morgue below `workspace` goes, its own among them, and the morgue if none is left.
void sweep_dead_morgues(const std::string& workspace);

// The secrets alone (the hide patterns), as the start of a jail masks them.
std::vector<GuardedPath> find_secrets(const std::string& workspace,
                                      const std::vector<std::string>& patterns);

}  // namespace belljar
