#pragma once
// Paths resolved the way the sandbox's kernel would resolve them, but by the broker
// (workspace_broker.hpp), outside the sandbox, one component at a time: every component is
// opened with O_NOFOLLOW from the descriptor of the one before, every symlink is read and its
// text walked in its place (at most 40, as the kernel allows), ".." never climbs above the
// sandbox's root. What comes back is a descriptor of the folder the last name lives in, that
// name, and where that folder is, as components from the sandbox's root: the rule is decided
// on those components, and the change is made through that descriptor, so no later rename or
// symlink swap can move it elsewhere.
//
// A magic link (/proc/PID/fd/N, /proc/self/cwd) is not followed: its text means nothing here.
#include <sys/stat.h>

#include <string>
#include <string_view>
#include <vector>

#include "sandbox/os/fd.hpp"

namespace belljar {

inline constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX, with its NUL
inline constexpr int kMaxSymlinks = 40;        // the kernel's MAXSYMLINKS

struct WalkedPath {
  Fd parent;                       // O_PATH descriptor of the folder holding `name`
  std::vector<std::string> where;  // that folder, as components from the sandbox's root
  std::vector<bool> marked;        // per folder of where, root first: it holds the marker
  std::string name;                // the last component: "" only for the root itself
  bool trailing_slash = false;     // the path ended in "/": the name must be a folder
  bool dots_last = false;          // the path ended in "." or "..": a folder, named here by
                                   // its parent, that rmdir and rename must not take
  // What the walk found at `name`: nothing, or an object it did not follow (a file, a folder,
  // a link left as it is) and its lstat; `unseen` when the path ended at a folder ("a/..").
  enum class Seen { unseen, absent, there } seen = Seen::unseen;
  struct stat seen_stat {};
  // Each symlink the walk followed on the way, as components from the root (the link's own
  // name): a change reached through a link the rule closes by name is that name's too.
  std::vector<std::vector<std::string>> links;
  // EXDEV: a symlink on procfs was met; `where` and `name` say which, this is what followed
  // it (/dev/stderr, /proc/self/fd/2: name "self", rest "fd", "2").
  std::vector<std::string> rest_after_magic;
};

// Where an object is: device, inode and mount, so a bind mount of a folder is not the folder.
struct ObjectId {
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t mount = 0;
  bool operator==(const ObjectId&) const = default;
};
// The identity of what `fd` refers to; false (errno set) when it can't be read.
bool object_id(int fd, ObjectId& id);

// A folder a walk may start from (a caller's cwd or dirfd, located once): its descriptor, its
// components from the root, and which folders on the way hold the marker, root first.
struct WalkStart {
  Fd dir;
  std::vector<std::string> where;
  std::vector<bool> marked;  // one more than `where`: the root's first
};

class SandboxPaths {
 public:
  // Whether a folder is marked (the broker's: a Python environment's root by its shape).
  using Marks = bool (*)(int dir);

  // `root`: the sandbox's root folder (an O_PATH descriptor of /proc/PID/root). `marks`: asked
  // of each folder on the way `marks_from` or more components below the root (the broker's:
  // the workspace and below; folders above it, /usr with its bin and lib, are never looked
  // at); none: nothing is marked.
  explicit SandboxPaths(int root, Marks marks = nullptr, size_t marks_from = 0)
      : root_(root), marks_(marks), marks_from_(marks_from) {}

  // Resolves `path`, relative to `start` (components from the root; empty for an absolute
  // path or one from the root). With `follow_last`, a last component that is a symlink is
  // followed too. 0, or the errno the kernel would give (ENOENT, ENOTDIR, ELOOP, ...;
  // EXDEV for a symlink on procfs, with `out` saying where).
  int walk(const std::vector<std::string>& start, std::string_view path, bool follow_last,
           WalkedPath& out) const;
  // The same from a located folder, without walking down to it again (an absolute path, or a
  // link's absolute text, still starts at the root).
  int walk(const WalkStart& start, std::string_view path, bool follow_last, WalkedPath& out) const;

  // The components of an open folder (a /proc/PID/cwd or /proc/PID/fd/N opened by the broker):
  // its path as /proc/self/fd shows it, checked by walking it back to the same object. false
  // when the two disagree (the folder moved meanwhile, or lies outside this root). The same
  // folder reached through a mount stacked on it since (a survey's guard) is located there.
  bool locate(int dir, std::vector<std::string>& where) const;
  // The same, as a start for walk(): `dir` duplicated (or, under a guard stacked since, the
  // folder as the path shows it), and the marker checked on the way.
  bool locate(int dir, WalkStart& start) const;

 private:
  bool holds_marker(int dir, size_t depth) const;

  int root_;
  Marks marks_;
  size_t marks_from_;
};

}  // namespace belljar
