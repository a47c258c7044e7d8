#pragma once
// The broker's memory of where callers' folders are (workspace_broker.hpp). A cwd is used call
// after call, and a folder files are made in file after file; walking each from the sandbox's
// root again would cost a descriptor per level per call. A folder is kept with its components
// from the root and the descriptor the walk ended on.
//
// Threat: the host may move a kept folder (or one above it) while the sandbox writes in it: a
// folder kept as "ws/out" that the host renamed to "ws/.git" must not be judged as "ws/out". An
// entry stands while nothing may have moved it: the broker bumps its generation after its own
// renames and removals and after each survey (mounts, masks, markers), and an inotify watch on
// the folder and on every folder above it up to the sandbox's root sees the host move or delete
// one (moved(), which the broker reads before it answers the next call). A folder that cannot
// be watched is not kept; it is walked again each time.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "sandbox/jail/sandbox_paths.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

class LocatedFolders {
 public:
  LocatedFolders();

  // What the broker polls; -1 when inotify is refused (then nothing is kept).
  int watch_fd() const { return watch_.get(); }
  // Drains the watches' events: true when a folder kept, or one above it, may have moved.
  bool moved();

  // The folder `dir` (a caller's cwd or dirfd, opened by the broker), by its identity: kept
  // when it was located before in this generation, located (and kept, if it can be watched)
  // otherwise. nullptr when it can't be located under `root`. Valid until the next call.
  const WalkStart* find(const SandboxPaths& paths, int root, int dir, uint64_t generation);
  // A folder by its absolute path as text from the sandbox's root: one a walk ended in before
  // in this generation. A path's folder is then not walked again for each file made in it.
  const WalkStart* by_path(const std::string& text, uint64_t generation) const;
  // The folder a walk ended in, kept for by_path as `text` (a path with no link on the way).
  void remember(int root, const WalkedPath& at, const std::string& text, uint64_t generation);

 private:
  static constexpr size_t kEntries = 32;
  static constexpr size_t kWatches = 4096;  // then the watches start afresh, entries with them
  static constexpr int kMaxDepth = 2048;    // PATH_MAX's worth of one-letter folders
  struct Entry {
    ObjectId id;
    std::string text;
    uint64_t generation = 0;
    WalkStart start;
  };

  bool watch_up(int root, int dir);
  const WalkStart* keep(Entry fresh);

  Fd watch_;
  std::set<int> watched_;  // watch descriptors: one per folder watched
  std::vector<Entry> entries_;
  Entry unkept_;  // a folder located but not watched: good for the call at hand only
  size_t next_ = 0;
};

}  // namespace belljar
