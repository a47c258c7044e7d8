#include "sandbox/jail/located_folders.hpp"

#include <fcntl.h>
#include <sys/inotify.h>
#include <unistd.h>

namespace belljar {

namespace {

bool path_of(int dir, std::string& text) {
  char buf[kMaxPathBytes];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(dir)).c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return false;
  text.assign(buf, static_cast<size_t>(n));
  return true;
}

Fd new_watch() {
  return Fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
}

}  // namespace

LocatedFolders::LocatedFolders() : watch_(new_watch()) {}

bool LocatedFolders::moved() {
  alignas(inotify_event) char buf[4096];
  bool any = false;
  for (;;) {
    ssize_t n = ::read(watch_.get(), buf, sizeof buf);
    if (n <= 0) return any;
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buf + at);
      // A file removed in a watched folder moves nothing; anything else (a folder moved,
      // removed or unmounted, the queue overflowing) may have.
      if (!(event->mask & IN_DELETE) || (event->mask & IN_ISDIR)) any = true;
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
}

const WalkStart* LocatedFolders::find(const SandboxPaths& paths, int root, int dir,
                                      uint64_t generation) {
  ObjectId id;
  if (!object_id(dir, id)) return nullptr;
  for (auto& entry : entries_)
    if (entry.generation == generation && entry.id == id) return &entry.start;
  Entry fresh{id, {}, generation, WalkStart{}};
  if (!path_of(dir, fresh.text) || !paths.locate(dir, fresh.start)) return nullptr;
  if (!watch_up(root, fresh.start.dir.get())) {
    unkept_ = std::move(fresh);
    return &unkept_.start;
  }
  return keep(std::move(fresh));
}

const WalkStart* LocatedFolders::by_path(const std::string& text, uint64_t generation) const {
  for (const auto& entry : entries_)
    if (entry.generation == generation && entry.text == text) return &entry.start;
  return nullptr;
}

void LocatedFolders::remember(int root, const WalkedPath& at, const std::string& text,
                              uint64_t generation) {
  Entry fresh{ObjectId{}, text, generation, WalkStart{}};
  fresh.start.dir.reset(::fcntl(at.parent.get(), F_DUPFD_CLOEXEC, 0));
  fresh.start.where = at.where;
  fresh.start.marked = at.marked;
  if (fresh.start.dir && object_id(fresh.start.dir.get(), fresh.id) &&
      watch_up(root, fresh.start.dir.get()))
    keep(std::move(fresh));
}

// Watches `dir` and each folder above it, up to the sandbox's root `root` (not watched: no one
// renames it): a move of any of them, and a folder removed in one (a removed folder's own
// event waits for the last descriptor to it, and the broker keeps one). false when one can't
// be watched, or the climb never meets the root.
bool LocatedFolders::watch_up(int root, int dir) {
  if (!watch_) return false;
  if (watched_.size() >= kWatches) {
    watch_ = new_watch();
    watched_.clear();
    entries_.clear();
    if (!watch_) return false;
  }
  ObjectId top, here, above;
  if (!object_id(root, top)) return false;
  Fd at(::fcntl(dir, F_DUPFD_CLOEXEC, 0));
  for (int depth = 0; at && depth < kMaxDepth; ++depth) {
    if (!object_id(at.get(), here)) return false;
    if (here == top) return true;
    int wd =
        ::inotify_add_watch(watch_.get(), ("/proc/self/fd/" + std::to_string(at.get())).c_str(),
                            IN_MOVE_SELF | IN_DELETE_SELF | IN_DELETE | IN_ONLYDIR);
    if (wd < 0) return false;
    watched_.insert(wd);
    Fd up(::openat(at.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!up || !object_id(up.get(), above) || above == here) return false;
    at = std::move(up);
  }
  return false;
}

const WalkStart* LocatedFolders::keep(Entry fresh) {
  if (entries_.size() < kEntries) {
    entries_.push_back(std::move(fresh));
    return &entries_.back().start;
  }
  Entry& slot = entries_[next_++ % kEntries];
  slot = std::move(fresh);
  return &slot.start;
}

}  // namespace belljar
