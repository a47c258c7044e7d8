#include "sandbox/jail_client/jail_helper.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/jail_client/worker_process.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

std::shared_ptr<const JailHelper> JailHelper::open(const std::filesystem::path& path) {
  const std::string shown = path.string();
  Fd opened(::open(shown.c_str(), O_PATH | O_CLOEXEC));
  if (!opened)
    throw SandboxError("the jail helper " + shown + ": " + errno_text(errno) +
                       " (belljar-jail is built and installed with belljar; reinstall both)");
  // Clear of the descriptors the warden's child puts at 0-5 before it execs the helper.
  Fd fd(::fcntl(opened.get(), F_DUPFD_CLOEXEC, 10));
  if (!fd) throw SandboxError("fcntl(F_DUPFD_CLOEXEC) for the jail helper: " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw SandboxError("fstat(" + shown + "): " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw SandboxError("the jail helper " + shown + " is not a file");
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    throw SandboxError("the jail helper " + shown + " belongs to uid " + std::to_string(st.st_uid) +
                       ", neither root nor this kernel's user: another user could replace it");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    throw SandboxError("the jail helper " + shown +
                       " is writable by its group or by others: chmod go-w " + shown);
  if (!(st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
    throw SandboxError("the jail helper " + shown + " is not executable");
  return std::shared_ptr<const JailHelper>(new JailHelper(std::move(fd), shown));
}

}  // namespace belljar
