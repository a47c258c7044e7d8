#pragma once
// The warden's keeper of the workspace guard (workspace_guard.hpp) for a running jail. Files
// appear in the workspace while a kernel runs — a .env the user saves on the host, a .git that
// a cell creates — so a survey at start is not enough: before every cell, and on a timer, the
// supervisor asks the warden for a new survey. What it finds that is not yet guarded is
// mounted inside the jail by a short-lived child that enters the jail's user and mount
// namespaces; the jail's own processes never hold the capabilities to do it. The same survey
// measures what the session has added to the workspace and, past --workspace-quota, makes the
// workspace mount read-only until enough is removed. It keeps the broker's morgue too (files
// whose last name the session removed while they were still open: counted until nobody holds
// them, removed at the end).
#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/jail_protocol/jail_reports.hpp"
#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

// Degraded mode's survey, where nothing is mounted nor measured: the names on protected links'
// ways alone, in `held`, for the broker to hold. A failure is the reply's error (the waiting cell
// fails closed, as strict's does) and leaves `held` empty.
SurveyReport survey_names_only(const std::string& workspace, const WorkspaceRules& rules,
                               std::optional<HeldNames>& held);

class WorkspaceWatch {
 public:
  explicit WorkspaceWatch(const JailSpec& spec);

  // The survey before the jail exists; its guards are mounted by init while it builds the
  // root. Where the workspace has no .git of its own (and .git is protected), an empty one is
  // made as a placeholder to mount read-only: git ignores an empty .git, and the sandbox
  // can't turn it into a repository whose hooks the host's git would run.
  // It also makes the morgue (kMorgueName) and empties it of what an earlier kernel left
  // (killed, it could not): its guard is left to hold_morgue().
  std::vector<GuardedPath> first_survey();
  // Once the jail is built and before the session runs: the morgue, opened inside the jail's
  // mount namespace for the broker (BrokerSettings::morgue), then masked there.
  // None when the start could not make it (the workspace's top is not writable).
  Fd hold_morgue();
  // Removes each file in the morgue nobody holds open any more (the same write lease the
  // broker asks); every survey does it first. `all`: every one, held or not, and the morgue
  // itself (the session is over: nothing of it holds anything).
  void sweep_morgue(bool all);
  // In a child the warden forks for good (init): the lock on this warden's morgue folder
  // (flock, shared by every descriptor of its open file) stays the warden's alone.
  void drop_morgue_lock() { morgue_lock_.reset(); }
  // Init was cloned: its namespaces are the ones later guards go into. Called before init
  // makes itself undumpable.
  void attach(pid_t init);
  // One survey of the workspace with the guards it adds; the reply for the supervisor. With the
  // session's baseline (the bytes the workspace held when the session began: the supervisor
  // keeps it across restarts), the workspace is made read-only past --workspace-quota.
  // `measure`: also sum the workspace's bytes (a stat per file; the quick survey before a cell
  // skips it, the timer's surveys do it).
  SurveyReport survey(std::optional<uint64_t> baseline, bool measure);
  // The names on protected links' ways, as the last survey that succeeded found them (the
  // broker holds them: held_names.hpp).
  const HeldNames& held() const { return held_; }

 private:
  WorkspaceRules rules(bool measure) const;
  void remember(const std::vector<GuardedPath>& guards);
  // Runs `work` in a child inside the jail's user and mount namespaces; throws with the
  // child's message when it fails.
  // `morgue_channel`: the child first sends the morgue, opened there, on it (hold_morgue).
  void in_jail(const std::vector<GuardedPath>& guards, int read_only, int morgue_channel = -1);

  JailSpec spec_;
  Fd user_ns_, mnt_ns_;
  std::map<std::string, unsigned long> guarded_;  // relative path -> host inode it guards
  HeldNames held_;
  bool over_ = false;        // over the quota, as last measured
  bool has_morgue_ = false;  // first_survey made (or emptied) it
  std::string morgue_name_;  // this warden's folder of the morgue (morgue_folder)
  Fd morgue_lock_;           // that folder, flock'd while the warden lives (a start spares it)
  bool read_only_ = false;   // the workspace mount is read-only (EBUSY can hold it back)
};

}  // namespace belljar
