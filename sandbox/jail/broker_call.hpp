#pragma once
// One system call the worker's seccomp filter stopped and handed to the workspace broker
// (workspace_broker.hpp), and the caller's memory it names. The call waits in the kernel until
// it is answered once: refused with an errno, given a result, given a descriptor the broker
// opened (installed and returned atomically, SECCOMP_ADDFD_FLAG_SEND), or let run as asked.
//
// Threat: the caller's memory is the cell's, and another of its threads may rewrite it at any
// moment; a string is read from it once, a page at a time, bounded by PATH_MAX, and the broker
// works from its copy. The caller's pid may be reused once the caller is gone: still_waiting()
// says whether the notification still stands, and the broker asks it after everything it read or
// opened on the caller's behalf and before it changes anything.
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace belljar {

struct BrokerCall {
  uint64_t id = 0;
  pid_t pid = 0;
  int nr = -1;
  uint64_t args[6] = {};
  int listener = -1;
  bool answered = false;

  int arg_int(int i) const { return static_cast<int>(static_cast<uint32_t>(args[i])); }
  bool still_waiting() const;
  // The call's answer: `error` (an errno, 0 for none) or `value` as its result.
  void reply(int error, int64_t value = 0);
  // The call goes on as the caller made it: for a call whose arguments are all registers.
  void let_run();
  // Installs `fd` in the caller and makes its number the call's result, atomically.
  void reply_fd(int fd, bool cloexec);
};

// Bytes of the caller's memory: process_vm_readv, or its /proc/PID/mem where a container's
// profile refuses that call (Docker's default and belljar's own pod profile do).
ssize_t read_memory(pid_t pid, uint64_t address, char* buf, size_t want);

// A NUL-terminated string of the caller's, read once, a page at a time (the string may end
// just before an unmapped page). 0, or EFAULT, ESRCH, ENAMETOOLONG.
int read_string(pid_t pid, uint64_t address, std::string& out);

// /proc/PID/`rest`.
std::string proc_path(pid_t pid, const std::string& rest);

}  // namespace belljar
