#include "sandbox/layers/seccomp_filter.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/fscrypt.h>
#include <linux/fsverity.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "sandbox/layers/syscall_table.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

// Namespace creation through clone(); clone3 gets ENOSYS so glibc falls back to clone, whose
// flags are a plain register we can inspect (clone3's live in memory seccomp cannot read).
// CLONE_NEWTIME is missing on purpose: its bit is CSIGNAL's for clone().
constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWUSER,  CLONE_NEWNS,  CLONE_NEWPID,
                                             CLONE_NEWNET,   CLONE_NEWIPC, CLONE_NEWUTS,
                                             CLONE_NEWCGROUP};

// Newer than some headers: a brokered call, once taken by the broker, waits for its answer
// through any signal but a fatal one.
constexpr unsigned long kWaitKillableRecv = 1UL << 5;
// O_TMPFILE also creates a file with a mode; its value includes O_DIRECTORY.
constexpr scmp_datum_t kOTmpfile = 020000000;

struct FilterDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using Filter = std::unique_ptr<void, FilterDeleter>;

void check(int rc, const std::string& what) {
  if (rc < 0) throw_errno(what, -rc);
}

int syscall_number(const std::string& name) {
  return native_syscall_number(name.c_str());
}

// The broker's calls go to the listener; an open only when it may write, create or truncate
// (reads cost nothing). The broker refuses setuid/setgid modes itself, so the mode rules
// below are left out: two actions on one call would be libseccomp's to order, not ours.
void add_broker_rules(void* ctx) {
  const scmp_datum_t writing[] = {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, kOTmpfile};
  for (const auto& name : brokered_syscalls()) {
    int nr = syscall_number(name);
    if (nr < 0) continue;
    int flags_arg = name == "open" ? 1 : name == "openat" ? 2 : -1;
    if (flags_arg < 0) {
      check(seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 0), "seccomp_rule_add(notify " + name + ")");
      continue;
    }
    for (scmp_datum_t bit : writing) {
      scmp_arg_cmp flags{static_cast<unsigned>(flags_arg), SCMP_CMP_MASKED_EQ, bit, bit};
      check(seccomp_rule_add_array(ctx, SCMP_ACT_NOTIFY, nr, 1, &flags),
            "seccomp_rule_add(notify " + name + " for writing)");
    }
  }
}

// No setuid/setgid files: as root, what the sandbox writes in the workspace lands on the host
// owned by the workspace's owner (root, maybe), where the sandbox's nosuid does not apply.
// chmod-family calls and file creation with those mode bits are refused; openat2 gets ENOSYS
// (its mode lives in memory seccomp cannot read; callers fall back to openat). With a broker,
// the broker refuses them itself.
void add_mode_rules(void* ctx) {
  const int eperm = SCMP_ACT_ERRNO(EPERM);
  struct ModeArg {
    const char* name;
    int nr;
    unsigned mode_arg;
    int flags_arg;  // -1: the call always creates or chmods
  };
  const ModeArg mode_calls[] = {{"chmod", SCMP_SYS(chmod), 1, -1},
                                {"fchmod", SCMP_SYS(fchmod), 1, -1},
                                {"fchmodat", SCMP_SYS(fchmodat), 2, -1},
                                {"fchmodat2", native_syscall_number("fchmodat2"), 2, -1},
                                {"creat", SCMP_SYS(creat), 1, -1},
                                {"mknod", SCMP_SYS(mknod), 1, -1},
                                {"mknodat", SCMP_SYS(mknodat), 2, -1},
                                {"open", SCMP_SYS(open), 2, 1},
                                {"openat", SCMP_SYS(openat), 3, 2}};
  for (const auto& call : mode_calls) {
    for (scmp_datum_t bit : {scmp_datum_t{S_ISUID}, scmp_datum_t{S_ISGID}}) {
      scmp_arg_cmp mode{call.mode_arg, SCMP_CMP_MASKED_EQ, bit, bit};
      if (call.flags_arg < 0) {
        check(seccomp_rule_add_array(ctx, eperm, call.nr, 1, &mode),
              std::string("seccomp_rule_add(") + call.name + " setuid/setgid)");
        continue;
      }
      for (scmp_datum_t create : {scmp_datum_t{O_CREAT}, scmp_datum_t{kOTmpfile}}) {
        scmp_arg_cmp flags{static_cast<unsigned>(call.flags_arg), SCMP_CMP_MASKED_EQ, create,
                           create};
        scmp_arg_cmp both[2] = {flags, mode};
        check(seccomp_rule_add_array(ctx, eperm, call.nr, 2, both),
              std::string("seccomp_rule_add(") + call.name + " creating setuid/setgid)");
      }
    }
  }
}

// TIOCSTI pushes input into a terminal, TIOCLINUX can too. The inode setters change a file
// through a descriptor opened only to read it, as its owner (flags: append-only, no-dump; a
// project id; its generation; fs-verity, which makes it read-only for good; an encryption
// policy on an empty folder, whose files the survey could not read): the table's ioctl row.
// The request is an int, so only its low 32 bits count.
void add_ioctl_rules(void* ctx) {
  for (unsigned long request :
       {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX),
        static_cast<unsigned long>(FS_IOC_SETFLAGS), static_cast<unsigned long>(FS_IOC32_SETFLAGS),
        static_cast<unsigned long>(FS_IOC_FSSETXATTR),
        static_cast<unsigned long>(FS_IOC_SETVERSION),
        static_cast<unsigned long>(FS_IOC32_SETVERSION),
        static_cast<unsigned long>(FS_IOC_ENABLE_VERITY),
        static_cast<unsigned long>(FS_IOC_SET_ENCRYPTION_POLICY)})
    check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                           SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, request)),
          "seccomp_rule_add(ioctl " + std::to_string(request) + ")");
}

// Netlink: only NETLINK_ROUTE, which getaddrinfo() and if_nameindex() read the interfaces
// through. Audit, netfilter, xfrm, uevents and the rest are kernel surface a notebook never
// needs. socket(): AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK only (no inet at all when there is
// no network namespace). Refuse everything else by ranges, so unknown future families are
// refused.
void add_socket_rules(void* ctx, bool refuse_inet) {
  const int eperm = SCMP_ACT_ERRNO(EPERM);
  check(seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 2,
                         SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(AF_NETLINK)),
                         SCMP_A2_32(SCMP_CMP_NE, static_cast<scmp_datum_t>(NETLINK_ROUTE))),
        "seccomp_rule_add(socket AF_NETLINK other than NETLINK_ROUTE)");

  std::vector<int> allowed = {AF_UNIX, AF_NETLINK};
  if (!refuse_inet) allowed.insert(allowed.end(), {AF_INET, AF_INET6});
  for (int family = 0; family <= AF_NETLINK; ++family) {
    bool ok = false;
    for (int a : allowed) ok = ok || a == family;
    if (!ok)
      check(seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(family))),
            "seccomp_rule_add(socket family " + std::to_string(family) + ")");
  }
  check(seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_GT, AF_NETLINK)),
        "seccomp_rule_add(socket families above AF_NETLINK)");
}

Filter build(const SeccompOptions& options) {
  Filter ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) throw SetupError("seccomp_init: out of memory");
  // Syscalls of other ABIs (i386 via int 0x80, x32) would bypass a filter written in x86_64
  // numbers: the bad-arch action refuses them all. libseccomp also sends x32 numbers on the
  // native arch there, as it knows x32 is not part of this filter.
  check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM)),
        "seccomp_attr_set(SCMP_FLTATR_ACT_BADARCH)");

  const int eperm = SCMP_ACT_ERRNO(EPERM);
  // Refused outright, each with the table's errno (hard links, extended attributes, mounts,
  // clone3 and openat2 with ENOSYS so glibc falls back, memory the cap could not count, ...).
  for (const auto& entry : syscall_table()) {
    if (entry.kind != SyscallClass::refused) continue;
    int nr = native_syscall_number(entry.name);
    if (nr < 0) continue;  // not a call of this architecture
    check(seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(entry.error), nr, 0),
          std::string("seccomp_rule_add(") + entry.name + ")");
  }
  // Numbers the table does not name, where Linux adds its new calls: a call newer than the
  // table fails closed (ENOSYS, as on an older kernel) until it is classified.
  for (int nr = kUnifiedFirst; nr < kUnclassifiedEnd; ++nr)
    if (!classified_number(nr))
      check(seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), nr, 0),
            "seccomp_rule_add(unclassified " + std::to_string(nr) + ")");
  for (unsigned long flag : kNamespaceFlags)
    check(seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)),
          "seccomp_rule_add(clone with namespace flags)");
  // The only door to a child reaped unseen is SIGCHLD's action (SIG_IGN or SA_NOCLDWAIT): the
  // action lives in memory the filter cannot read (and a notification's check of it would race
  // a second thread), so the whole setting is refused when the CPU is counted by process tree.
  // The signal number is an int: only its low 32 bits count (the kernel drops the rest, and
  // libseccomp's 32-bit EQ would still want the high half zero).
  if (options.cpu_by_process_tree)
    check(seccomp_rule_add(
              ctx.get(), eperm, SCMP_SYS(rt_sigaction), 2,
              SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, static_cast<scmp_datum_t>(SIGCHLD)),
              SCMP_A1(SCMP_CMP_NE, 0)),
          "seccomp_rule_add(rt_sigaction SIGCHLD)");

  // A lease on a file the sandbox owns would hold every other opener of it (another kernel's
  // broker sharing the workspace, the host's editor) for up to lease-break-time: a read of the
  // last fixes of round three. The command is an int: its low 32 bits.
  check(seccomp_rule_add(
            ctx.get(), eperm, SCMP_SYS(fcntl), 1,
            SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, static_cast<scmp_datum_t>(F_SETLEASE))),
        "seccomp_rule_add(fcntl F_SETLEASE)");

  if (options.broker)
    add_broker_rules(ctx.get());
  else
    add_mode_rules(ctx.get());
  add_ioctl_rules(ctx.get());
  add_socket_rules(ctx.get(), options.refuse_inet);
  return ctx;
}

}  // namespace

namespace {

std::vector<std::string> names_of(SyscallClass kind, int error) {
  std::vector<std::string> names;
  for (const auto& entry : syscall_table())
    if (entry.kind == kind && (error == 0 || entry.error == error)) names.push_back(entry.name);
  return names;
}

}  // namespace

const std::vector<std::string>& refused_syscalls() {
  static const std::vector<std::string> names = names_of(SyscallClass::refused, 0);
  return names;
}

const std::vector<std::string>& brokered_syscalls() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> brokered = names_of(SyscallClass::brokered, 0);
    brokered.insert(brokered.begin(), {"open", "openat"});  // when they may write
    return brokered;
  }();
  return names;
}

Fd install_seccomp(const SeccompOptions& options) {
  Filter ctx = build(options);
  if (!options.broker) {
    check(seccomp_load(ctx.get()), "seccomp_load");
    return Fd();
  }
  // Loaded by hand: libseccomp 2.5 cannot ask for WAIT_KILLABLE_RECV, without which a signal
  // (an interrupt) arriving after the broker took a call would restart a call it already made.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2");
  Fd read_end(fds[0]), write_end(fds[1]);
  check(seccomp_export_bpf(ctx.get(), write_end.get()), "seccomp_export_bpf");
  write_end.reset();
  std::string program = read_to_eof(read_end.get());
  if (program.empty() || program.size() % sizeof(sock_filter) != 0)
    throw SetupError("seccomp_export_bpf: a program of " + std::to_string(program.size()) +
                     " bytes");
  sock_fprog prog{static_cast<unsigned short>(program.size() / sizeof(sock_filter)),
                  reinterpret_cast<sock_filter*>(program.data())};
  unsigned long flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | kWaitKillableRecv;
  long fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
  if (fd < 0 && errno == EINVAL)  // before Linux 5.19
    fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (fd < 0) throw_errno("seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER)");
  return Fd(static_cast<int>(fd));
}

std::string seccomp_pseudo_code(const SeccompOptions& options) {
  Filter ctx = build(options);
  FILE* out = ::tmpfile();
  if (!out) return {};
  std::string text;
  if (seccomp_export_pfc(ctx.get(), ::fileno(out)) == 0) {
    std::rewind(out);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, out)) > 0) text.append(buf, n);
  }
  std::fclose(out);
  return text;
}

}  // namespace belljar
