#pragma once
// The jail helper (`belljar-jail`, sandbox/jail/main.cpp) as the supervisor holds it. Where it
// is comes from the supervisor's own executable (kernel/command_line/resources.cpp); it is
// opened once, when the kernel starts, and checked (sandbox/os/installed_file.hpp). Every
// sandbox is then exec'd from that descriptor (execveat), so a file replaced while a kernel
// runs (an upgrade) never mixes a helper of one build into a session of another.
#include <filesystem>
#include <memory>
#include <string>

#include "sandbox/os/fd.hpp"

namespace belljar {

class JailHelper {
 public:
  // Opens and checks `path`; throws SandboxError (worker_process.hpp) naming it and the fix.
  static std::shared_ptr<const JailHelper> open(const std::filesystem::path& path);

  // An O_PATH descriptor, close-on-exec, at 10 or above (clear of the child's fds 0-5).
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

 private:
  JailHelper(Fd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  Fd fd_;
  std::string path_;
};

}  // namespace belljar
