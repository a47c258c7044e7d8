#include "sandbox/os/installed_file.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/os/setup_error.hpp"

namespace belljar {

Fd open_installed_file(const std::string& path, std::string_view what, InstalledKind kind) {
  const std::string name = std::string(what) + " " + path;
  Fd opened(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!opened)
    throw SetupError(name + ": " + errno_text(errno) +
                     " (it is built and installed with belljar; reinstall both)");
  Fd fd(::fcntl(opened.get(), F_DUPFD_CLOEXEC, 10));
  if (!fd) throw SetupError("fcntl(F_DUPFD_CLOEXEC) for " + name + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw SetupError("fstat(" + path + "): " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw SetupError(name + " is not a file");
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    throw SetupError(name + " belongs to uid " + std::to_string(st.st_uid) +
                     ", neither root nor this kernel's user: another user could replace it");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    throw SetupError(name + " is writable by its group or by others: chmod go-w " + path);
  if (kind == InstalledKind::executable && !(st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
    throw SetupError(name + " is not executable");
  return fd;
}

void* load_module_symbol(const Fd& file, std::string_view what, const char* symbol) {
  // The loader opens the magic link, which reaches the inode checked above even if the path
  // has been replaced since. RTLD_LOCAL: the module's symbols resolve nothing of ours.
  // The loader also knows an object by the name it was loaded under, and "/proc/self/fd/N" names
  // whatever holds N now: once N was closed and reused, a second module loaded through it was
  // taken for the first (two modules in one process, `belljar launch`). The name used is a
  // duplicate kept open for the process's life, as the module stays mapped for it.
  int kept = ::fcntl(file.get(), F_DUPFD_CLOEXEC, 10);
  if (kept < 0)
    throw SetupError("fcntl(F_DUPFD_CLOEXEC) for " + std::string(what) + ": " + errno_text(errno));
  const std::string through = "/proc/self/fd/" + std::to_string(kept);
  void* handle = ::dlopen(through.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    ::close(kept);  // nothing was loaded under its name
    const char* why = ::dlerror();
    throw SetupError("cannot load " + std::string(what) + ": " + (why ? why : "dlopen failed"));
  }
  ::dlerror();
  void* address = ::dlsym(handle, symbol);
  if (!address)
    throw SetupError(std::string(what) + " has no " + symbol +
                     ": it belongs to another build of belljar; reinstall both");
  return address;
}

}  // namespace belljar
