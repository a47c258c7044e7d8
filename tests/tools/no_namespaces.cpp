// no_namespaces COMMAND [ARGS...]: runs COMMAND under a seccomp filter that refuses what a
// container runtime's default profile refuses an unprivileged pod: new namespaces (unshare,
// setns, clone with CLONE_NEW*; clone3, whose flags a filter cannot read, gets ENOSYS so libc
// falls back to clone), mounts and pivot_root. The tests run `belljar` under it to see degraded
// mode as a default Kubernetes pod gets it.
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: no_namespaces COMMAND [ARGS...]\n");
    return 2;
  }
  scmp_filter_ctx filter = seccomp_init(SCMP_ACT_ALLOW);
  if (!filter) return 1;
  // Other ABIs (x32, i386) pass through to the kernel's own filter, as a runtime's profile
  // lets them (libseccomp would otherwise kill the thread).
  int rc = seccomp_attr_set(filter, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ALLOW);
  for (int call : {SCMP_SYS(unshare), SCMP_SYS(setns), SCMP_SYS(mount), SCMP_SYS(umount2),
                   SCMP_SYS(pivot_root), SCMP_SYS(open_tree), SCMP_SYS(move_mount),
                   SCMP_SYS(fsopen), SCMP_SYS(fsmount)})
    rc |= seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), call, 0);
  // One rule per flag: a clone asking for any of them is refused.
  for (unsigned long flag : {CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
                             CLONE_NEWNET, CLONE_NEWCGROUP})
    rc |= seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
  rc |= seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc != 0 || ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(filter) != 0) {
    std::fprintf(stderr, "no_namespaces: cannot install the filter: %s\n", std::strerror(errno));
    return 1;
  }
  seccomp_release(filter);
  ::execvp(argv[1], argv + 1);
  std::fprintf(stderr, "no_namespaces: exec %s: %s\n", argv[1], std::strerror(errno));
  return 127;
}
