#include "sandbox/layers/privileges.hpp"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "sandbox/os/setup_error.hpp"
#include "sandbox/os/small_file.hpp"

namespace belljar {

namespace {

int last_capability() {
  std::string text = read_small_file("/proc/sys/kernel/cap_last_cap", 16);
  auto fields = words(text);
  auto last = fields.empty() ? std::nullopt : parse_unsigned(fields.front());
  return last && *last < 64 ? static_cast<int>(*last) : CAP_LAST_CAP;
}

bool have_setpcap() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return data[CAP_SETPCAP / 32].effective & (1u << (CAP_SETPCAP % 32));
}

}  // namespace

void drop_bounding_set() {
  if (!have_setpcap()) return;
  for (int cap = 0; cap <= last_capability(); ++cap)
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
      throw_errno("prctl(PR_CAPBSET_DROP, " + std::to_string(cap) + ")");
}

void drop_capabilities() {
  if (have_setpcap()) {
    drop_bounding_set();
    const unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                               SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                               SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (::prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) throw_errno("prctl(PR_SET_SECUREBITS)");
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    throw_errno("prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capset, &header, data) != 0) throw_errno("capset(all empty)");
}

void forbid_new_privileges() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw_errno("prctl(PR_SET_NO_NEW_PRIVS)");
}

}  // namespace belljar
