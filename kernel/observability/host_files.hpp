#pragma once
// The files the supervisor writes on the host (the audit log, the metrics file), and where
// they may be. The sandbox is the attacker: given a log path it can write, it planted a symlink
// at the log's name or at the metrics file's predictable temporary name and made the
// supervisor append to or overwrite a host file of its choosing.
// So: a path whose directory resolves to where the sandbox can write (the workspace; in
// degraded mode also /tmp and /dev/shm) is refused at start; the log is opened once with
// O_NOFOLLOW and must be a regular file; the metrics file is replaced through a directory fd
// (O_DIRECTORY|O_NOFOLLOW, opened at start) with a temporary file created O_EXCL|O_NOFOLLOW
// under an unpredictable name, then renameat() over the old one.
#include <filesystem>
#include <optional>
#include <string>

#include "sandbox/os/fd.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

// Where the sandbox of `policy` can write, when `directory` (resolved as the host sees it)
// lies there: "the workspace", "/tmp" or "/dev/shm"; nullopt when it does not.
std::optional<std::string> sandbox_writable_place(const Policy& policy,
                                                  const std::filesystem::path& directory);

// Throws UsageError naming `flag` when `path` lies where the sandbox of `policy` can write.
// Returns `path` unchanged, so it can sit in a constructor's initializer list.
const std::string& refuse_sandbox_writable(const Policy& policy, const std::string& flag,
                                           const std::string& path);

// A file the kernel reads its policy from (`--policy`, `--upstream-ca`), checked before it is
// trusted: not where the sandbox can write (refuse_sandbox_writable), not a symbolic link (which
// may lead there), and of one name (a hard link from the workspace rewrote an --upstream-ca file
// in place, the outside attack on round three). A policy file the sandbox could rewrite gave the
// next MCP session --isolation none (the outside review of the session router). Throws UsageError
// naming `flag`.
void refuse_untrusted_source(const Policy& policy, const std::string& flag,
                             const std::filesystem::path& path);
// Every such file of `policy`.
void refuse_untrusted_sources(const Policy& policy);

// The file at `path` for appending: created 0600 if missing, never through a symlink, and a
// regular file (or /dev/null). Throws UsageError naming `flag`, the call and errno.
Fd open_append_only(const std::string& flag, const std::string& path);

// A file rewritten whole, atomically: a reader sees the old content or the new, never a mix.
class ReplacedFile {
 public:
  ReplacedFile() = default;
  // Opens the directory of `path` now (throws UsageError naming `flag` when it can't).
  ReplacedFile(const std::string& flag, const std::string& path);
  bool enabled() const { return bool(directory_); }
  // Writes `content` to a fresh temporary file and renames it over the file. Returns false
  // (with *why) when it could not; the old content then stays.
  bool replace(const std::string& content, std::string* why) const;

 private:
  Fd directory_;
  std::string name_;  // the file's name inside directory_
};

}  // namespace belljar
