#pragma once
// `belljar mcp --session-folders`: each session works in a folder of its own, which no other
// session's sandbox has: <workspace>/.belljar-sessions/<the session's kernel id>, made as the
// session starts (0700, the sandbox's user's when the server runs as root) and kept when it
// ends (the agent's files are the user's). The workspace itself is then no session's. A
// dot-name, because no sandbox may make one: a session of an earlier run without the flag
// cannot have planted a link or a file there (the third outside review's way to fail every
// start).
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

namespace belljar {

class SessionFolders {
 public:
  // `owner`: whom a folder is given to (the sandbox's host ids when the server is root).
  SessionFolders(std::filesystem::path workspace, std::optional<std::pair<uid_t, gid_t>> owner);

  inline static const char* const kRoot = ".belljar-sessions";

  // At start: what stands at kRoot is a folder of this user's, or nothing; else why not.
  std::optional<std::string> unusable() const;
  // The folder for `kernel_id`, made now; nullopt with `why` when it cannot be (a `sessions`
  // that is not a folder of its own, a link, a name taken).
  std::optional<std::filesystem::path> make(const std::string& kernel_id, std::string* why) const;

 private:
  std::filesystem::path workspace_;
  std::optional<std::pair<uid_t, gid_t>> owner_;
};

}  // namespace belljar
