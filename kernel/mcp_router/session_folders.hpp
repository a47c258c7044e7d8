#pragma once
// `belljar mcp --session-folders`: each session works in a folder of its own, which no other
// session's sandbox has: <workspace>/sessions/<the session's kernel id>, made as the session
// starts (0700, the sandbox's user's when the server runs as root) and kept when it ends (the
// agent's files are the user's). The workspace itself is then no session's.
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

  // The folder for `kernel_id`, made now; nullopt with `why` when it cannot be (a `sessions`
  // that is not a folder of its own, a link, a name taken).
  std::optional<std::filesystem::path> make(const std::string& kernel_id, std::string* why) const;

 private:
  std::filesystem::path workspace_;
  std::optional<std::pair<uid_t, gid_t>> owner_;
};

}  // namespace belljar
