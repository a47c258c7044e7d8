#pragma once
// What the jail's processes report, and what the supervisor asks of the warden after setup.
//
//   init -> warden:        ready | error | exit
//   warden -> supervisor:  ready (with the worker's host pid, the cgroup, notes) | error |
//                          exit (with what the cgroup measured) | survey
//   supervisor -> warden:  the JailSpec (first), then survey requests
//
// Each is a typed struct; encode() makes its record (record.hpp) and decode_report() reads one
// back, refusing anything malformed with the field it stumbled on. The kind of a report is
// one enum, spelled for the wire by one function.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sandbox/jail_protocol/record.hpp"

namespace belljar {

// The workspace broker's thread in the warden, by its name (/proc/PID/task/TID/comm, at most
// 15 bytes): the warden names it before it says it is ready, and the supervisor adds that
// thread's CPU to the sandbox's, so work the broker does for the worker is the session's.
inline constexpr const char* kBrokerThreadName = "belljar-broker";

// Where the sandbox's cgroup lives (layers/cgroup.hpp): the warden makes it, the supervisor
// reads its CPU and memory figures, moves its memory cap for a %%limits cell, and removes it
// when the warden could not.
struct CgroupPaths {
  std::string v2;  // a v2 directory, or the v1 controllers' directories below
  std::string memory, pids, cpuacct;
  bool empty() const { return v2.empty() && memory.empty() && pids.empty() && cpuacct.empty(); }
};

// How a path in the workspace is guarded (layers/workspace_guard.hpp).
enum class GuardKind { mask, read_only };
const char* guard_kind_name(GuardKind kind);  // "masked", "read-only"

struct ReadyReport {
  pid_t worker_pid = -1;  // as the host sees it; init's report leaves it unset
  CgroupPaths cgroup;
  std::vector<std::string> notes;  // what this sandbox does differently from the full jail
};

struct ErrorReport {
  std::string message;  // one line: the failing step, its arguments and errno
};

struct ExitReport {
  int code = -1;   // >= 0 when the worker (or, seen by the warden, init) exited
  int signal = 0;  // > 0 when a signal killed it
  // Filled by the warden:
  bool memory_limit = false;        // the OOM killer acted, or the warden's sampler stopped it
  uint64_t memory_total_bytes = 0;  // what the sampler saw when it stopped the sandbox
  int64_t cpu_ns = -1;              // the cgroup's CPU time; -1 unknown
  uint64_t peak_memory_bytes = 0;   // the cgroup's peak; 0 unknown
};

struct SurveyedGuard {
  std::string path;  // relative to the workspace
  GuardKind kind = GuardKind::mask;
  std::string reason;  // the pattern it matched, "unreadable", ...
};

struct SurveyReport {
  std::vector<SurveyedGuard> guarded;  // guards this survey added
  std::optional<uint64_t> bytes;       // measured surveys only
  std::optional<uint64_t> added_bytes;
  uint64_t entries = 0;
  bool over_quota = false;
  bool read_only = false;  // the workspace mount is read-only now
  std::string busy;        // the quota's read-only switch was refused (a file open for writing)
  std::string error;       // the survey failed: the supervisor fails the waiting cell closed
  uint64_t micros = 0;     // how long the survey took
};

// A change the workspace broker refused, sent the moment it refuses it (before the refused call
// returns in the cell), once per path.
struct RefusalReport {
  std::string path;    // relative to the workspace
  std::string reason;  // "create: a dot-path, which host tools read", ...
};

using JailReport = std::variant<ReadyReport, ErrorReport, ExitReport, SurveyReport, RefusalReport>;

std::string encode(const JailReport& report);
// encode() sent as one frame (jail_channel.hpp); false when the reader is gone.
bool send_report(int fd, const JailReport& report) noexcept;
// The report in `bytes`, or RecordError naming what is wrong with them.
JailReport decode_report(std::string_view bytes);

struct SurveyRequest {
  std::optional<uint64_t> baseline;  // the workspace's bytes when the session began
  bool measure = false;              // also sum the workspace's bytes
  std::string encode() const;
  static SurveyRequest decode(std::string_view bytes);  // throws RecordError
};

}  // namespace belljar
