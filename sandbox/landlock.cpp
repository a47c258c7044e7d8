#include "sandbox/landlock.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/fd.hpp"
#include "sandbox/setup_error.hpp"

namespace belljar {

namespace {

// Access rights newer than this system's headers.
constexpr uint64_t kTruncate = 1ULL << 14;   // ABI 3
constexpr uint64_t kIoctlDev = 1ULL << 15;   // ABI 5

uint64_t handled_for(int abi) {
  uint64_t all = (1ULL << 13) - 1;  // ABI 1: EXECUTE .. MAKE_SYM
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) all |= kTruncate;
  if (abi >= 5) all |= kIoctlDev;
  return all;
}

constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | kTruncate | kIoctlDev;

}  // namespace

int landlock_abi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

void restrict_filesystem(const LandlockRules& rules) {
  int abi = landlock_abi();
  if (abi == 0) throw SetupError("landlock_create_ruleset: Landlock is not available on this kernel");
  const uint64_t handled = handled_for(abi);
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled;
  Fd ruleset(static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0)));
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
  const uint64_t read = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  for (const auto& path : rules.read_only) allow(path, read);
  for (const auto& path : rules.read_write) allow(path, handled);

  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw_errno("prctl(PR_SET_NO_NEW_PRIVS)");
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) throw_errno("landlock_restrict_self");
}

}  // namespace belljar
