#include "sandbox/layers/landlock.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

#include "sandbox/os/fd.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

// Access rights newer than this system's headers.
constexpr uint64_t kTruncate = 1ULL << 14;  // ABI 3
constexpr uint64_t kIoctlDev = 1ULL << 15;  // ABI 5

uint64_t handled_for(int abi) {
  uint64_t all = (1ULL << 13) - 1;  // ABI 1: EXECUTE .. MAKE_SYM
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) all |= kTruncate;
  if (abi >= 5) all |= kIoctlDev;
  return all;
}

// Newer than this system's headers: TCP rules (ABI 4) and scopes (ABI 6), and the ruleset
// attribute that grew with them.
constexpr uint64_t kNetBindTcp = 1ULL << 0;
constexpr uint64_t kNetConnectTcp = 1ULL << 1;
constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;
constexpr uint64_t kScopeSignal = 1ULL << 1;
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | kTruncate | kIoctlDev;

}  // namespace

int landlock_abi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

void restrict_filesystem(const LandlockRules& rules) {
  int abi = landlock_abi();
  if (abi == 0)
    throw SetupError("landlock_create_ruleset: Landlock is not available on this kernel");
  const uint64_t handled = handled_for(abi);
  RulesetAttr attr{handled, 0, 0};
  size_t attr_size = sizeof attr.handled_access_fs;
  if (abi >= 4) {
    // No TCP bind or connect at all (seccomp refuses inet sockets already; a second wall).
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    attr_size = offsetof(RulesetAttr, scoped);
  }
  if (abi >= 6) {
    // Without a pid or network namespace: no signals to processes outside the sandbox (the
    // supervisor may share our uid) and no host abstract unix sockets.
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    attr_size = sizeof attr;
  }
  Fd ruleset(static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0)));
  if (!ruleset) throw_errno("landlock_create_ruleset");

  auto allow = [&](const std::string& path, uint64_t access) {
    Fd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
    if (!fd) {
      if (errno == ENOENT || errno == EACCES) return;
      throw_errno("open(" + path + ")");
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_errno("fstat(" + path + ")");
    if (!S_ISDIR(st.st_mode)) access &= kFileRights;
    landlock_path_beneath_attr rule{};
    rule.allowed_access = access & handled;
    rule.parent_fd = fd.get();
    if (::syscall(SYS_landlock_add_rule, ruleset.get(), LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0)
      throw_errno("landlock_add_rule(" + path + ")");
  };
  const uint64_t read =
      LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  for (const auto& path : rules.read_only) allow(path, read);
  for (const auto& path : rules.read_write) allow(path, handled);

  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw_errno("prctl(PR_SET_NO_NEW_PRIVS)");
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0)
    throw_errno("landlock_restrict_self");
}

}  // namespace belljar
