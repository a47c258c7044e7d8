#pragma once
// The workspace as the host holds it, listed, read and written by the supervisor for a client
// it trusts (MCP's list_files, read_file and write_file).
//
// Threat: the sandbox owns its Python. A file tool answered by code inside the session (as it
// once was: an expression evaluated in the worker) reports whatever a cell made it report — a
// clean .gitconfig while the host file holds a planted fsmonitor. So these answers never pass
// through the sandbox: the supervisor opens the workspace itself, beneath its root
// (openat2 RESOLVE_BENEATH: no "..", no absolute or escaping symlink, no /proc magic link),
// never follows a symlink it lists, reads no FIFO or device, and applies the jail's own rules:
// a secret the jail masks (defaults + --hide) is refused here, and a path the jail keeps
// read-only (--protect and the defaults) is not written. Every call is bounded (entries, bytes).
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/layers/workspace_rule.hpp"
#include "sandbox/os/fd.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

// A request the workspace can't serve (outside it, a secret, not a file, ...): the text is for
// the client as it stands.
class WorkspaceRefusal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct WorkspaceEntry {
  enum class Kind { file, directory, symlink, other, unknown };
  std::string path;  // relative to the workspace
  Kind kind = Kind::unknown;
  std::optional<uint64_t> size;  // files that are not masked
  bool masked = false;           // a secret: listed, never entered or measured
  std::string target;            // a symlink's text
};
std::string_view entry_kind_name(WorkspaceEntry::Kind kind);

struct WorkspaceListing {
  std::string path;  // "." for the workspace itself
  std::vector<WorkspaceEntry> entries;
  bool truncated = false;
};

struct WorkspaceRead {
  std::string path;
  uint64_t size = 0;  // the whole file's
  uint64_t offset = 0;
  std::string bytes;  // what was read from offset
  bool truncated = false;
};

struct WorkspaceWrite {
  std::string path;
  uint64_t bytes_written = 0;
  uint64_t size = 0;
};

class WorkspaceFiles {
 public:
  static constexpr size_t kMaxEntries = 2000;          // listed in one answer
  static constexpr size_t kMaxScanned = 100'000;       // directory entries read in one call
  static constexpr uint64_t kMaxReadBytes = 8u << 20;  // one read_file answer
  static constexpr uint64_t kDefaultReadBytes = 1u << 20;

  // Opens the workspace of `policy`. Throws WorkspaceRefusal when it can't be opened.
  explicit WorkspaceFiles(const Policy& policy);

  WorkspaceListing list(const std::string& path, bool recursive) const;
  WorkspaceRead read(const std::string& path, uint64_t offset, uint64_t max_bytes) const;
  WorkspaceWrite write(const std::string& path, std::string_view data, bool append,
                       bool create_dirs) const;

 private:
  struct Opened {
    Fd fd;
    std::string relative;  // where it really is, below the root ("." for the root)
  };
  std::string relative_request(const std::string& path) const;
  // Throws WorkspaceRefusal, or returns no fd for a missing path when `missing_ok`.
  Opened open_beneath(const std::string& relative, uint64_t flags, bool missing_ok = false) const;
  void give_to_sandbox(int dir_fd, const std::string& name) const;
  bool masked(const std::string& relative) const;
  // Why the workspace rule (workspace_rule.hpp) closes `relative` to the sandbox, or nothing:
  // the agent's writes obey the rule the broker holds the session to.
  std::optional<std::string> closed(const std::string& relative, NameChange change) const;
  void refuse_if_masked(const std::string& asked, const std::string& relative) const;

  Fd root_;
  std::string root_path_;  // the workspace as policy names it, for messages
  std::vector<std::string> hide_;
  WorkspaceRule rule_;
  uid_t owner_uid_;  // who the sandbox writes as on the host (the kernel, or --sandbox-user)
  gid_t owner_gid_;
};

}  // namespace belljar
