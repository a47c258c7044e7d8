#pragma once
// Every system call of the native architecture, classified once: brokered (the workspace
// broker decides it, sandbox/jail/workspace_broker.hpp), refused (an errno, always), decided in
// part by its arguments (a register the filter reads), or harmless, each with the reason. The
// worker's seccomp filter (seccomp_filter.cpp) is built from this table and from nothing else,
// and docs/security.md shows it.
//
// The threat is the sibling channel: chmod was brokered while a mode could still be set as an
// ACL through setxattr, and utimensat changed dot-files' times. A call the table does not name
// cannot be allowed by omission: a unit test walks libseccomp's whole table for this
// architecture and fails on any name missing here, and the numbers past the newest call named
// here (kernels newer than libseccomp) are refused with ENOSYS until someone classifies them.
#include <vector>

namespace belljar {

enum class SyscallClass {
  brokered,  // stopped and decided by the workspace broker (without one: allowed)
  refused,   // fails with `error`, whatever its arguments
  in_part,   // decided by its arguments in the filter (see seccomp_filter.cpp)
  harmless,  // allowed: the reason says why it changes no name the rule protects
};

struct SyscallEntry {
  const char* name;
  SyscallClass kind;
  int error;  // for `refused`
  const char* reason;
};

// The whole table.
const std::vector<SyscallEntry>& syscall_table();

// The entry for `name`, or nullptr when the table does not classify it.
const SyscallEntry* classified(const char* name);

// The native number of a call: libseccomp's, or ours for the calls newer than libseccomp
// (-1: the call does not exist on this architecture).
int native_syscall_number(const char* name);

// Whether an entry of the table is the call numbered `nr` on this architecture.
bool classified_number(int nr);

// Numbers in [kUnifiedFirst, kUnclassifiedEnd) that no entry names are refused with ENOSYS:
// Linux gives every architecture its new calls from 424 on, in order.
constexpr int kUnifiedFirst = 424;
constexpr int kUnclassifiedEnd = 470 + 64;

const char* class_name(SyscallClass kind);

}  // namespace belljar
