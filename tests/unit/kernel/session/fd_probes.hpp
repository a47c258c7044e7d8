#pragma once
// Small probes the session tests share: whether a descriptor is readable now, and the
// liveness answers a ParentWatch may be given in place of kill(pid, 0).
#include <poll.h>
#include <sys/types.h>

namespace belljar::testing {

inline bool readable(int fd) {
  pollfd item{fd, POLLIN, 0};
  return ::poll(&item, 1, 0) == 1 && (item.revents & POLLIN);
}
inline bool always(pid_t) {
  return true;
}
inline bool never(pid_t) {
  return false;
}

}  // namespace belljar::testing
