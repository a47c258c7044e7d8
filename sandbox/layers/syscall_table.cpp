#include "sandbox/layers/syscall_table.hpp"

#include <seccomp.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>

namespace belljar {

namespace {

struct Group {
  SyscallClass kind;
  int error;
  const char* reason;
  std::initializer_list<const char*> names;
};

constexpr auto kBrokered = SyscallClass::brokered;
constexpr auto kRefused = SyscallClass::refused;
constexpr auto kInPart = SyscallClass::in_part;
constexpr auto kHarmless = SyscallClass::harmless;

// The table. A call that takes a path or a descriptor and could change what a name holds is
// brokered or refused; the rest say why they cannot.
const Group kGroups[] = {
    // --- brokered: the broker resolves the path itself and asks the rule ---
    {kBrokered,
     0,
     "makes, removes or renames a name",
     {"creat", "mkdir", "mkdirat", "mknod", "mknodat", "unlink", "unlinkat", "rmdir", "rename",
      "renameat", "renameat2", "symlink", "symlinkat", "truncate"}},
    {kBrokered,
     0,
     "changes a name's mode or owner",
     {"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "lchown", "fchown", "fchownat"}},
    {kBrokered,
     0,
     "changes a name's times (build tools and backups read them)",
     {"utime", "utimes", "futimesat", "utimensat"}},
    {kBrokered,
     0,
     "a unix socket's path is a name; the address is read once, the bind made by "
     "the broker",
     {"bind"}},
    {kBrokered, 0, "the callers' umask, which the broker applies to what it makes", {"umask"}},

    // --- decided in part by a register ---
    {kInPart,
     0,
     "brokered when it may write, create or truncate; a read opens what the mounts "
     "and masks show",
     {"open", "openat"}},
    {kInPart, 0, "refused (EPERM) with a namespace flag", {"clone"}},
    {kInPart,
     0,
     "refused (EPERM) setting SIGCHLD's action when no cgroup counts the session's CPU: an "
     "ignored SIGCHLD or SA_NOCLDWAIT has the kernel reap children whose CPU then reaches no "
     "parent's cutime; querying it (act NULL), and every other signal, passes",
     {"rt_sigaction"}},
    {kInPart,
     0,
     "refused (EPERM) taking a lease (F_SETLEASE): a lease on a workspace file holds every "
     "other opener for up to lease-break-time (45 s) — another kernel's broker, the host's "
     "editor; every other command passes",
     {"fcntl"}},
    {kInPart,
     0,
     "only AF_UNIX, AF_NETLINK (NETLINK_ROUTE) and, with a network namespace, "
     "AF_INET/AF_INET6",
     {"socket"}},
    {kInPart,
     0,
     "refused (EPERM): TIOCSTI, TIOCLINUX (input pushed into a terminal) and the "
     "inode setters a read-only descriptor reaches as its owner: FS_IOC_SETFLAGS, "
     "FS_IOC_FSSETXATTR, FS_IOC_SETVERSION, FS_IOC_ENABLE_VERITY, "
     "FS_IOC_SET_ENCRYPTION_POLICY",
     {"ioctl"}},

    // --- refused ---
    {kRefused,
     EPERM,
     "a second name for a file the rule judged under its first",
     {"link", "linkat"}},
    {kRefused,
     EOPNOTSUPP,
     "an extended attribute is content the rule never sees: an ACL sets a mode "
     "(system.posix_acl_access), user.* reaches dot-files; EOPNOTSUPP, as a filesystem without "
     "them, which shutil.copystat, cp -a and tar ignore",
     {"setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
      "setxattrat", "removexattrat"}},
    {kRefused,
     EPERM,
     "inode flags and project ids set by path (file_setattr, Linux 6.17)",
     {"file_setattr"}},
    {kRefused,
     EPERM,
     "the filesystem view and namespaces",
     {"mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree", "open_tree_attr",
      "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"}},
    {kRefused,
     EPERM,
     "other processes' memory",
     {"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp"}},
    {kRefused,
     EPERM,
     "kernel attack surface; io_uring would make every call above unseen",
     {"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
      "io_uring_register", "keyctl", "add_key", "request_key", "modify_ldt"}},
    {kRefused,
     EPERM,
     "the machine itself; open_by_handle_at opens a file by no name at all",
     {"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
      "open_by_handle_at", "swapon", "swapoff", "reboot", "iopl", "ioperm", "acct", "quotactl",
      "quotactl_fd", "syslog", "lookup_dcookie", "uselib", "vhangup"}},
    {kRefused,
     EPERM,
     "the machine's clock, shared by every process",
     {"clock_settime", "clock_adjtime", "adjtimex", "settimeofday"}},
    {kRefused,
     ENOSYS,
     "memory no process's mappings show (the memory cap could not count it); POSIX message "
     "queues are names in the IPC namespace's own filesystem, the host's in degraded mode",
     {"memfd_create", "memfd_secret", "shmget", "msgget", "semget", "mq_open", "mq_unlink"}},
    {kRefused,
     ENOSYS,
     "counts the host keeps for a user or the machine, not the sandbox: a session holding "
     "aio contexts (fs.aio-max-nr) or inotify/fanotify instances (per host user) made the host's "
     "own io_setup and file watchers fail (the outside red team's third pass); a watcher must "
     "poll instead",
     {"io_setup", "inotify_init", "inotify_init1", "fanotify_init"}},
    {kRefused,
     ENOSYS,
     "clone3's flags and openat2's mode live in memory the filter cannot read: "
     "glibc falls back to clone and openat",
     {"clone3", "openat2"}},
    {kRefused,
     ENOSYS,
     "obsolete, or no longer implemented by Linux: nothing a notebook runs needs them",
     {"_sysctl", "create_module", "get_kernel_syms", "query_module", "nfsservctl", "getpmsg",
      "putpmsg", "afs_syscall", "tuxcall", "security", "vserver", "epoll_ctl_old", "epoll_wait_old",
      "remap_file_pages", "ustat", "sysfs"}},

    // --- harmless ---
    {kHarmless,
     0,
     "reads a name: the mounts, the masks and Landlock decide what it may see, and a read "
     "changes nothing",
     {"stat",
      "lstat",
      "newfstatat",
      "statx",
      "access",
      "faccessat",
      "faccessat2",
      "readlink",
      "readlinkat",
      "getcwd",
      "chdir",
      "statfs",
      "getxattr",
      "lgetxattr",
      "listxattr",
      "llistxattr",
      "getxattrat",
      "listxattrat",
      "file_getattr",
      "name_to_handle_at",
      "inotify_add_watch",
      "fanotify_mark",
      "statmount",
      "listmount"}},
    {kHarmless,
     0,
     "runs a file it can read: the mounts decide what may run",
     {"execve", "execveat"}},
    {kHarmless,
     0,
     "an open descriptor's data or state: the open that made it was decided (for writing, by "
     "the broker)",
     {"read",
      "write",
      "pread64",
      "pwrite64",
      "readv",
      "writev",
      "preadv",
      "pwritev",
      "preadv2",
      "pwritev2",
      "lseek",
      "close",
      "close_range",
      "dup",
      "dup2",
      "dup3",
      "flock",
      "fsync",
      "fdatasync",
      "sync_file_range",
      "fadvise64",
      "readahead",
      "ftruncate",
      "fallocate",
      "sendfile",
      "splice",
      "tee",
      "vmsplice",
      "copy_file_range",
      "fstat",
      "fstatfs",
      "getdents",
      "getdents64",
      "fchdir",
      "fgetxattr",
      "flistxattr",
      "cachestat",
      "sync",
      "syncfs",
      "inotify_rm_watch"}},
    {kHarmless,
     0,
     "waits and events on descriptors the process already holds",
     {"poll",
      "ppoll",
      "select",
      "pselect6",
      "epoll_create",
      "epoll_create1",
      "epoll_ctl",
      "epoll_wait",
      "epoll_pwait",
      "epoll_pwait2",
      "eventfd",
      "eventfd2",
      "signalfd",
      "signalfd4",
      "timerfd_create",
      "timerfd_settime",
      "timerfd_gettime",
      "pipe",
      "pipe2",
      "io_destroy",
      "io_getevents",
      "io_pgetevents",
      "io_submit",
      "io_cancel",
      "mq_timedsend",
      "mq_timedreceive",
      "mq_notify",
      "mq_getsetattr"}},
    {kHarmless,
     0,
     "sockets already made: the network namespace (strict), Landlock's scopes and the egress "
     "proxy decide what they reach",
     {"connect", "accept", "accept4", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
      "recvmmsg", "shutdown", "listen", "getsockname", "getpeername", "socketpair", "setsockopt",
      "getsockopt"}},
    {kHarmless,
     0,
     "SysV objects only the refused *get calls make; another's only by its own permissions",
     {"shmat", "shmctl", "shmdt", "semop", "semctl", "semtimedop", "msgsnd", "msgrcv", "msgctl"}},
    {kHarmless,
     0,
     "the process's own memory (RLIMIT_AS and the memory cap count it)",
     {"brk",           "mmap",          "mprotect",
      "munmap",        "mremap",        "msync",
      "mincore",       "madvise",       "mlock",
      "munlock",       "mlockall",      "munlockall",
      "mlock2",        "pkey_mprotect", "pkey_alloc",
      "pkey_free",     "membarrier",    "mbind",
      "set_mempolicy", "get_mempolicy", "set_mempolicy_home_node",
      "migrate_pages", "move_pages",    "map_shadow_stack",
      "mseal"}},
    {kHarmless,
     0,
     "the process's own threads, signals and state",
     {"rt_sigprocmask",
      "rt_sigreturn",
      "rt_sigpending",
      "rt_sigtimedwait",
      "rt_sigsuspend",
      "sigaltstack",
      "futex",
      "futex_waitv",
      "futex_wake",
      "futex_wait",
      "futex_requeue",
      "set_tid_address",
      "set_robust_list",
      "get_robust_list",
      "rseq",
      "arch_prctl",
      "prctl",
      "personality",
      "set_thread_area",
      "get_thread_area",
      "restart_syscall",
      "exit",
      "exit_group",
      "uretprobe"}},
    {kHarmless,
     0,
     "other processes: the pid namespace (strict) and Landlock's signal scope (degraded) keep "
     "them to the session's own",
     {"fork",
      "vfork",
      "wait4",
      "waitid",
      "kill",
      "tkill",
      "tgkill",
      "rt_sigqueueinfo",
      "rt_tgsigqueueinfo",
      "pidfd_open",
      "pidfd_send_signal",
      "process_madvise",
      "process_mrelease",
      "setpgid",
      "setsid",
      "getpgid",
      "getsid",
      "getpgrp",
      "prlimit64",
      "getpriority",
      "setpriority",
      "ioprio_get",
      "ioprio_set"}},
    {kHarmless,
     0,
     "time, scheduling and the machine's description, read or used",
     {"nanosleep",
      "clock_nanosleep",
      "clock_gettime",
      "clock_getres",
      "gettimeofday",
      "time",
      "times",
      "getitimer",
      "setitimer",
      "alarm",
      "pause",
      "timer_create",
      "timer_settime",
      "timer_gettime",
      "timer_getoverrun",
      "timer_delete",
      "getrusage",
      "getrlimit",
      "setrlimit",
      "sysinfo",
      "uname",
      "getrandom",
      "getcpu",
      "sched_yield",
      "sched_setparam",
      "sched_getparam",
      "sched_setscheduler",
      "sched_getscheduler",
      "sched_get_priority_max",
      "sched_get_priority_min",
      "sched_rr_get_interval",
      "sched_setaffinity",
      "sched_getaffinity",
      "sched_setattr",
      "sched_getattr"}},
    {kHarmless,
     0,
     "identity: the worker holds no capability, so it can only keep or drop its ids; "
     "sethostname needs one too",
     {"getpid",   "getppid",   "gettid",    "getuid",      "geteuid",      "getgid",
      "getegid",  "getgroups", "getresuid", "getresgid",   "setuid",       "setgid",
      "setreuid", "setregid",  "setresuid", "setresgid",   "setgroups",    "setfsuid",
      "setfsgid", "capget",    "capset",    "sethostname", "setdomainname"}},
    {kHarmless,
     0,
     "only narrows what the caller itself may do",
     {"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
      "lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules"}},
};

// Calls newer than some libseccomp (2.5.4 names up to futex_requeue): their numbers, the same
// on every architecture from 424 on.
struct Numbered {
  const char* name;
  int number;
};
constexpr Numbered kNumbers[] = {
#if defined(__x86_64__)
    {"uretprobe", 335},
#endif
    {"futex_waitv", 449},       {"set_mempolicy_home_node", 450},
    {"cachestat", 451},         {"fchmodat2", 452},
    {"map_shadow_stack", 453},  {"futex_wake", 454},
    {"futex_wait", 455},        {"futex_requeue", 456},
    {"statmount", 457},         {"listmount", 458},
    {"lsm_get_self_attr", 459}, {"lsm_set_self_attr", 460},
    {"lsm_list_modules", 461},  {"mseal", 462},
    {"setxattrat", 463},        {"getxattrat", 464},
    {"listxattrat", 465},       {"removexattrat", 466},
    {"open_tree_attr", 467},    {"file_getattr", 468},
    {"file_setattr", 469},
};

}  // namespace

const std::vector<SyscallEntry>& syscall_table() {
  static const std::vector<SyscallEntry> table = [] {
    std::vector<SyscallEntry> entries;
    for (const auto& group : kGroups)
      for (const char* name : group.names)
        entries.push_back({name, group.kind, group.error, group.reason});
    return entries;
  }();
  return table;
}

const SyscallEntry* classified(const char* name) {
  for (const auto& entry : syscall_table())
    if (std::strcmp(entry.name, name) == 0) return &entry;
  return nullptr;
}

int native_syscall_number(const char* name) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr != __NR_SCMP_ERROR && nr >= 0) return nr;
  for (const auto& numbered : kNumbers)
    if (std::strcmp(numbered.name, name) == 0) return numbered.number;
  return -1;
}

bool classified_number(int nr) {
  for (const auto& entry : syscall_table())
    if (native_syscall_number(entry.name) == nr) return true;
  return false;
}

const char* class_name(SyscallClass kind) {
  switch (kind) {
    case SyscallClass::brokered:
      return "brokered";
    case SyscallClass::refused:
      return "refused";
    case SyscallClass::in_part:
      return "in part";
    case SyscallClass::harmless:
      return "harmless";
  }
  return "?";
}

}  // namespace belljar
