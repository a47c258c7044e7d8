// refuse_prctl OPTION COMMAND [ARGS...]: runs COMMAND under a seccomp filter that makes
// prctl(OPTION, ...) fail with EPERM (OPTION is the number, e.g. 4 for PR_SET_DUMPABLE), in
// COMMAND and every process it starts. The tests use it to see a hardening call fail for real:
// belljar must refuse to start, naming the call and errno, never carry on without it.
#include <seccomp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: refuse_prctl OPTION COMMAND [ARGS...]\n");
    return 2;
  }
  char* end = nullptr;
  unsigned long option = std::strtoul(argv[1], &end, 10);
  if (end == argv[1] || *end != '\0') {
    std::fprintf(stderr, "refuse_prctl: %s is not a prctl option number\n", argv[1]);
    return 2;
  }
  scmp_filter_ctx filter = seccomp_init(SCMP_ACT_ALLOW);
  if (!filter) return 1;
  int rc = seccomp_attr_set(filter, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ALLOW);
  rc |= seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1,
                         SCMP_A0(SCMP_CMP_EQ, option));
  if (rc != 0 || ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(filter) != 0) {
    std::fprintf(stderr, "refuse_prctl: cannot install the filter: %s\n", std::strerror(errno));
    return 1;
  }
  seccomp_release(filter);
  ::execvp(argv[2], argv + 2);
  std::fprintf(stderr, "refuse_prctl: exec %s: %s\n", argv[2], std::strerror(errno));
  return 127;
}
