#include "sandbox/layers/mounts.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <functional>

#include "sandbox/os/path_parts.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

constexpr uint64_t kNoSymlinks = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

size_t depth(const std::string& path) {
  return path_components(path).size();
}

// Walks `dir` below `root` one component at a time, never through a symlink, creating missing
// directories. Targets are resolved host paths, so a symlink on the way means something is off.
Fd make_dirs(int root, const std::vector<std::string>& parts, const std::string& shown) {
  Fd current(::fcntl(root, F_DUPFD_CLOEXEC, 3));
  if (!current) throw_errno("fcntl(F_DUPFD_CLOEXEC)");
  for (const auto& part : parts) {
    int fd = openat2_fd(current.get(), part, O_PATH | O_DIRECTORY, kNoSymlinks);
    if (fd < 0 && errno == ENOENT) {
      if (::mkdirat(current.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
        throw_errno("mkdir(" + shown + ": " + part + ")");
      fd = openat2_fd(current.get(), part, O_PATH | O_DIRECTORY, kNoSymlinks);
    }
    if (fd < 0) throw_errno("openat2(" + shown + ": " + part + ", RESOLVE_NO_SYMLINKS)");
    current.reset(fd);
  }
  return current;
}

// An existing or new directory or empty file at `target` (inside the root) to mount on.
Fd mount_point(int root, const std::string& target, bool directory) {
  auto parts = path_components(target);
  if (parts.empty()) throw SetupError("mount point " + target + ": not a path below the root");
  std::string name = parts.back();
  parts.pop_back();
  Fd parent = make_dirs(root, parts, target);
  int fd = openat2_fd(parent.get(), name, O_PATH | O_NOFOLLOW, kNoSymlinks);
  if (fd < 0 && errno == ENOENT) {
    if (directory) {
      if (::mkdirat(parent.get(), name.c_str(), 0755) != 0) throw_errno("mkdir(" + target + ")");
    } else {
      Fd created(::openat(parent.get(), name.c_str(),
                          O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444));
      if (!created) throw_errno("creat(" + target + ")");
    }
    fd = openat2_fd(parent.get(), name, O_PATH | O_NOFOLLOW, kNoSymlinks);
  }
  if (fd < 0) throw_errno("openat2(" + target + ", RESOLVE_NO_SYMLINKS)");
  return Fd(fd);
}

void attach(int tree, int target, const std::string& what) {
  if (::move_mount(tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    throw_errno("move_mount(" + what + ")");
}

void set_attributes(int tree, uint64_t attributes, bool recursive, const std::string& what,
                    int userns = -1) {
  mount_attr attr{};
  attr.attr_set = attributes;
  if (userns >= 0) attr.userns_fd = static_cast<uint64_t>(userns);
  unsigned flags = AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
  if (::mount_setattr(tree, "", flags, &attr, sizeof attr) != 0)
    throw_errno("mount_setattr(" + what + ")");
}

// A detached tmpfs (fsopen/fsconfig/fsmount): it appears nowhere until attached.
Fd new_filesystem(const char* type, const std::vector<std::pair<std::string, std::string>>& options,
                  unsigned attributes, const std::string& what) {
  Fd context(::fsopen(type, FSOPEN_CLOEXEC));
  if (!context) throw_errno(std::string("fsopen(") + type + ") for " + what);
  for (const auto& [key, value] : options)
    if (::fsconfig(context.get(), FSCONFIG_SET_STRING, key.c_str(), value.c_str(), 0) != 0)
      throw_errno(std::string("fsconfig(") + type + ", " + key + "=" + value + ") for " + what);
  if (::fsconfig(context.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    throw_errno(std::string("fsconfig(") + type + ", FSCONFIG_CMD_CREATE) for " + what);
  Fd mount(::fsmount(context.get(), FSMOUNT_CLOEXEC, attributes));
  if (!mount) throw_errno(std::string("fsmount(") + type + ") for " + what);
  return mount;
}

Fd clone_tree(int dirfd, const std::string& path, bool recursive, const std::string& what) {
  unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
  if (path.empty()) flags |= AT_EMPTY_PATH;
  Fd tree(::open_tree(dirfd, path.c_str(), flags));
  if (!tree) throw_errno("open_tree(" + what + ", OPEN_TREE_CLONE)");
  return tree;
}

void write_file_at(int root, const std::string& path, const std::string& text) {
  auto parts = path_components(path);
  std::string name = parts.back();
  parts.pop_back();
  Fd parent = make_dirs(root, parts, path);
  Fd file(::openat(parent.get(), name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
                   0644));
  if (!file) throw_errno("creat(" + path + ")");
  if (::write(file.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw_errno("write(" + path + ")");
}

void make_link(int root, const std::string& path, const std::string& points_to) {
  auto parts = path_components(path);
  std::string name = parts.back();
  parts.pop_back();
  Fd parent = make_dirs(root, parts, path);
  if (::symlinkat(points_to.c_str(), parent.get(), name.c_str()) != 0 && errno != EEXIST)
    throw_errno("symlink(" + path + " -> " + points_to + ")");
}

std::string fs_type_of(const std::string& path) {
  struct statfs st {};
  if (::statfs(path.c_str(), &st) != 0) return "unknown";
  switch (st.f_type) {
    case 0xEF53:
      return "ext4";
    case 0x01021994:
      return "tmpfs";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x794c7630:
      return "overlayfs";
    case 0x6969:
      return "nfs";
    case 0x65735546:
      return "fuse";
    default:
      return "filesystem type 0x" + [&] {
        char buf[32];
        auto [end, error] =
            std::to_chars(buf, buf + sizeof buf, static_cast<unsigned long>(st.f_type), 16);
        return std::string(buf, end);
      }();
  }
}

std::string etc_passwd() {
  return std::string(kSandboxUser) + ":x:" + std::to_string(kSandboxUid) + ":" +
         std::to_string(kSandboxGid) + ":" + kSandboxUser + ":" + kSandboxHome + ":/bin/sh\n" +
         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
}

std::string etc_group() {
  return std::string(kSandboxUser) + ":x:" + std::to_string(kSandboxGid) + ":\nnogroup:x:65534:\n";
}

std::string etc_hosts() {
  return std::string("127.0.0.1\tlocalhost\n127.0.1.1\t") + kSandboxHostname +
         "\n::1\tlocalhost ip6-localhost ip6-loopback\n";
}

}  // namespace

std::vector<BindTree> clone_bind_sources(const JailSpec& spec, int idmap_userns,
                                         std::vector<std::string>& notes) {
  std::vector<BindTree> trees;
  for (const auto& bind : spec.binds) {
    BindTree item;
    item.bind = bind;
    // Recursive: a non-recursive copy of a tree with locked submounts would be refused, and
    // submounts are part of what the user sees at that path anyway.
    item.tree = clone_tree(AT_FDCWD, bind.source, true, bind.source);
    struct stat st {};
    if (::fstat(item.tree.get(), &st) != 0) throw_errno("fstat(" + bind.source + ")");
    item.directory = S_ISDIR(st.st_mode);
    switch (bind.kind) {
      case JailBind::Kind::read_only:
        set_attributes(item.tree.get(), MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                       true, bind.source + ", read-only");
        break;
      case JailBind::Kind::device:
        set_attributes(item.tree.get(), MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
                       true, bind.source + ", read-only");
        break;
      case JailBind::Kind::workspace:
        set_attributes(item.tree.get(), MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true, bind.source);
        if (idmap_userns >= 0) {
          try {
            set_attributes(item.tree.get(), MOUNT_ATTR_IDMAP, true,
                           bind.source + ", MOUNT_ATTR_IDMAP", idmap_userns);
          } catch (const SetupError& e) {
            std::string why = "the workspace " + bind.source + " (" + fs_type_of(bind.source) +
                              ") cannot be idmapped for the sandbox user: " + e.what();
            if (spec.strict)
              throw SetupError(
                  why +
                  "; run belljar as the workspace's owner, pass --sandbox-user with the "
                  "workspace's owner, or pass --isolation degraded (the workspace is then "
                  "writable only where its permissions allow the sandbox user)");
            notes.push_back(why +
                            ": bound without idmapping, writable only where its permissions allow");
            item.tree = clone_tree(AT_FDCWD, bind.source, true, bind.source);
            set_attributes(item.tree.get(), MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true,
                           bind.source);
          }
        }
        break;
    }
    trees.push_back(std::move(item));
  }
  return trees;
}

std::vector<std::string> apply_guards(int workspace, int mask_source,
                                      const std::vector<GuardedPath>& guards,
                                      const std::string& shown) {
  std::vector<std::string> applied;
  for (const auto& guard : guards) {
    // Walked below the workspace without following symlinks: the paths came from a survey of
    // a directory the sandbox can change, so anything on the way may have been swapped.
    int fd =
        openat2_fd(workspace, guard.relative, O_PATH | O_NOFOLLOW, kNoSymlinks | RESOLVE_BENEATH);
    if (fd < 0 && (errno == ENOENT || errno == ELOOP || errno == EXDEV))
      continue;  // gone, or moved
    if (fd < 0) throw_errno("openat2(" + shown + "/" + guard.relative + ") to guard it");
    Fd target(fd);
    struct stat st {};
    if (::fstat(target.get(), &st) != 0) throw_errno("fstat(" + guard.relative + ")");
    if (S_ISLNK(st.st_mode))
      continue;  // replaced by a symlink since the survey: resolves in the jail
    bool directory = S_ISDIR(st.st_mode);
    Fd tree;
    if (guard.kind == GuardKind::mask) {
      // An empty, mode-0 file or directory, mounted read-only over the secret.
      tree = clone_tree(mask_source, directory ? "mask-dir" : "mask-file", false, "the mask");
      set_attributes(tree.get(),
                     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                     false, "the mask of " + guard.relative);
    } else {
      // The path itself, read-only, mounted over itself: busy to the sandbox's own calls; the
      // broker, which renames in the host's namespace, refuses to move it (workspace_judge.hpp).
      tree = clone_tree(target.get(), "", true, guard.relative);
      set_attributes(tree.get(), MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true,
                     "read-only " + guard.relative);
    }
    attach(tree.get(), target.get(),
           (guard.kind == GuardKind::mask ? "mask -> " : "read-only -> ") + shown + "/" +
               guard.relative);
    applied.push_back(guard.relative);
  }
  return applied;
}

Fd make_mask_source() {
  Fd fs_root =
      new_filesystem("tmpfs", {{"size", "16k"}, {"nr_inodes", "16"}, {"mode", "0755"}},
                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, "the masks");
  if (::mkdirat(fs_root.get(), "mask-dir", 0) != 0 ||
      ::fchmodat(fs_root.get(), "mask-dir", 0, 0) != 0)
    throw_errno("mkdir(mask-dir)");
  Fd mask(::openat(fs_root.get(), "mask-file", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0));
  if (!mask) throw_errno("creat(mask-file)");
  return fs_root;
}

Fd open_jail_workspace(const std::string& workspace) {
  Fd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw_errno("open(/)");
  // No symlinks on the way: the workspace may sit below the sandbox's own writable /tmp.
  Fd ws(openat2_fd(root.get(), workspace, O_PATH | O_DIRECTORY, kNoSymlinks));
  if (!ws) throw_errno("openat2(" + workspace + ", RESOLVE_NO_SYMLINKS)");
  return ws;
}

void set_workspace_read_only(const std::string& workspace, bool read_only) {
  Fd ws = open_jail_workspace(workspace);
  mount_attr attr{};
  (read_only ? attr.attr_set : attr.attr_clr) = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(ws.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
    throw_errno("mount_setattr(" + workspace + (read_only ? ", read-only)" : ", read-write)"));
}

namespace {

// The new root, an empty tmpfs, attached on an existing directory of the old root (returned)
// just long enough to be filled and pivoted into; every source was cloned before, so nothing it
// hides is needed.
std::string attach_new_root() {
  // Nothing we mount may propagate back to the host's mount namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    throw_errno("mount(/, MS_REC|MS_PRIVATE)");
  std::string base;
  for (const char* candidate : {"/tmp", "/mnt", "/var/tmp"}) {
    struct stat st {};
    if (::lstat(candidate, &st) == 0 && S_ISDIR(st.st_mode)) {
      base = candidate;
      break;
    }
  }
  if (base.empty()) throw SetupError("no directory (/tmp, /mnt) to build the sandbox's root on");
  Fd root = new_filesystem("tmpfs", {{"size", "4m"}, {"nr_inodes", "16384"}, {"mode", "0755"}},
                           MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, "the sandbox root");
  if (::move_mount(root.get(), "", AT_FDCWD, base.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    throw_errno("move_mount(the sandbox root -> " + base + ")");
  return base;
}

// One size-capped tmpfs backs /tmp, /dev/shm and the home, so --tmp-size caps them together;
// it also holds the empty, unreadable file and directory that secrets are masked with. Mounted
// at `scratch_path` (/.scratch of the new root) until the root is filled.
Fd make_scratch(int root, const std::string& scratch_path, uint64_t tmp_size_bytes) {
  {
    Fd scratch_fs = new_filesystem(
        "tmpfs",
        {{"size", std::to_string(tmp_size_bytes)},
         {"nr_inodes", std::to_string(std::max<uint64_t>(4096, tmp_size_bytes / 8192))},
         {"mode", "0755"}},
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, "/tmp");
    Fd point = mount_point(root, "/.scratch", true);
    attach(scratch_fs.get(), point.get(), "tmpfs -> /tmp");
  }
  Fd scratch(::open(scratch_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!scratch) throw_errno("open(" + scratch_path + ")");
  for (auto [name, mode] :
       {std::pair{"tmp", 01777}, {"shm", 01777}, {"home", 0700}, {"mask-dir", 0}}) {
    if (::mkdirat(scratch.get(), name, mode) != 0)
      throw_errno(std::string("mkdir(/tmp: ") + name + ")");
    if (::fchmodat(scratch.get(), name, mode, 0) != 0)
      throw_errno(std::string("chmod(/tmp: ") + name + ")");
  }
  Fd mask(::openat(scratch.get(), "mask-file", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0));
  if (!mask) throw_errno("creat(mask file)");
  return scratch;
}

// Every mount of the new root: the bound trees, the scratch's folders, /dev and /proc.
void mount_trees(int root, int scratch, std::vector<BindTree>& trees) {
  struct Step {
    std::string target;
    std::function<void(int point)> mount;
    bool directory = true;
  };
  std::vector<Step> steps;
  for (auto& item : trees) {
    BindTree* tree = &item;
    steps.push_back({item.bind.target,
                     [tree](int point) {
                       attach(tree->tree.get(), point,
                              tree->bind.source + " -> " + tree->bind.target);
                     },
                     item.directory});
  }
  auto scratch_dir = [&](const char* name, const std::string& target) {
    steps.push_back({target, [scratch, name, target](int point) {
                       Fd tree = clone_tree(scratch, name, false, std::string("tmpfs ") + name);
                       attach(tree.get(), point, "tmpfs -> " + target);
                     }});
  };
  scratch_dir("tmp", "/tmp");
  scratch_dir("shm", "/dev/shm");
  scratch_dir("home", kSandboxHome);
  steps.push_back({"/dev", [](int point) {
                     Fd dev = new_filesystem(
                         "tmpfs", {{"size", "64k"}, {"nr_inodes", "64"}, {"mode", "0755"}},
                         MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, "/dev");
                     attach(dev.get(), point, "tmpfs -> /dev");
                   }});
  steps.push_back({"/proc", [](int point) {
                     // A fresh proc of the sandbox's pid namespace: only its own processes.
                     Fd proc = new_filesystem(
                         "proc", {}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                         "/proc");
                     attach(proc.get(), point, "proc -> /proc");
                   }});
  // Parents before children: the workspace under /tmp goes on the new /tmp, --ro paths inside
  // the workspace on top of it.
  std::stable_sort(steps.begin(), steps.end(),
                   [](const Step& a, const Step& b) { return depth(a.target) < depth(b.target); });
  for (const auto& step : steps) {
    Fd point = mount_point(root, step.target, step.directory);
    step.mount(point.get());
  }
}

// The links and files the sandbox's own /dev and /etc hold; /dev read-only once they are made.
void write_dev_and_etc(int root, const JailSpec& spec) {
  for (const auto& link : spec.links) make_link(root, link.path, link.points_to);
  make_link(root, "/dev/fd", "/proc/self/fd");
  make_link(root, "/dev/stdin", "/proc/self/fd/0");
  make_link(root, "/dev/stdout", "/proc/self/fd/1");
  make_link(root, "/dev/stderr", "/proc/self/fd/2");
  {
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_RDONLY;
    if (::mount_setattr(root, "dev", 0, &attr, sizeof attr) != 0)
      throw_errno("mount_setattr(/dev, read-only)");
  }
  write_file_at(root, "/etc/passwd", etc_passwd());
  write_file_at(root, "/etc/group", etc_group());
  write_file_at(root, "/etc/hosts", etc_hosts());
  write_file_at(root, "/etc/hostname", std::string(kSandboxHostname) + "\n");
  write_file_at(root, "/etc/nsswitch.conf",
                "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n"
                "protocols: files\nservices: files\n");
  for (const auto& file : spec.files) write_file_at(root, file.path, file.text);
}

// pivot_root(".", "."): the old root ends up mounted on top of the new one at "/", and the
// MNT_DETACH umount of "." then drops it (and every host mount below it) from this namespace.
// Unlike chroot, no reference to the host's tree is left to climb back through.
void pivot_into(int root, const std::string& base) {
  if (::fchdir(root) != 0) throw_errno("fchdir(the sandbox root)");
  if (::syscall(SYS_pivot_root, ".", ".") != 0)
    throw_errno("pivot_root(., .) in the new root on " + base);
  if (::umount2(".", MNT_DETACH) != 0) throw_errno("umount2(the old root, MNT_DETACH)");
  if (::chdir("/") != 0) throw_errno("chdir(/)");
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(AT_FDCWD, "/", 0, &attr, sizeof attr) != 0)
    throw_errno("mount_setattr(/, read-only)");
}

}  // namespace

void assemble_root(const JailSpec& spec, std::vector<BindTree>& trees,
                   const std::vector<GuardedPath>& guards) {
  const std::string base = attach_new_root();
  Fd root(::open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw_errno("open(" + base + ")");
  const std::string scratch_path = base + "/.scratch";
  Fd scratch = make_scratch(root.get(), scratch_path, spec.tmp_size_bytes);
  mount_trees(root.get(), scratch.get(), trees);
  write_dev_and_etc(root.get(), spec);

  // Secrets masked, host-run files read-only (workspace_guard.hpp).
  if (!guards.empty()) {
    Fd workspace = make_dirs(root.get(), path_components(spec.workspace), spec.workspace);
    apply_guards(workspace.get(), scratch.get(), guards, spec.workspace);
  }

  scratch.reset();
  if (::umount2(scratch_path.c_str(), MNT_DETACH) != 0)
    throw_errno("umount2(" + scratch_path + ", MNT_DETACH)");
  if (::unlinkat(root.get(), ".scratch", AT_REMOVEDIR) != 0) throw_errno("rmdir(/.scratch)");
  pivot_into(root.get(), base);
}

}  // namespace belljar
