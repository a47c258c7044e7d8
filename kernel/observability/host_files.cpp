#include "kernel/observability/host_files.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace belljar {

namespace fs = std::filesystem;

namespace {

bool inside(const fs::path& path, const fs::path& root) {
  auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return r == root.end();
}

// Where the sandbox can create, delete or replace files, resolved as the host sees it.
std::vector<fs::path> sandbox_writable_roots(const Policy& policy) {
  std::vector<fs::path> roots;
  std::error_code ec;
  if (policy.isolation == Isolation::none) return roots;  // no sandbox: nothing to keep it out of
  roots.push_back(fs::weakly_canonical(policy.workspace, ec));
  // Degraded mode has no private /tmp: Landlock lets the worker write the host's.
  if (policy.isolation == Isolation::degraded)
    for (const char* shared : {"/tmp", "/dev/shm"})
      roots.push_back(fs::weakly_canonical(shared, ec));
  return roots;
}

std::string errno_text(int error) {
  return std::strerror(error);
}

}  // namespace

std::optional<std::string> sandbox_writable_place(const Policy& policy, const fs::path& directory) {
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(directory, ec);
  if (ec) resolved = directory;
  fs::path workspace = fs::weakly_canonical(policy.workspace, ec);
  for (const fs::path& root : sandbox_writable_roots(policy))
    if (inside(resolved, root)) return root == workspace ? "the workspace" : root.string();
  return std::nullopt;
}

const std::string& refuse_sandbox_writable(const Policy& policy, const std::string& flag,
                                           const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  // The directory decides: whoever can write there can put a symlink or a file of its own
  // in the name's place.
  fs::path directory = fs::weakly_canonical(fs::absolute(path).parent_path(), ec);
  if (ec) return path;  // opening it says why
  if (auto place = sandbox_writable_place(policy, directory))
    throw UsageError(flag + " " + path + ": its directory " + directory.string() +
                     " is writable from inside the sandbox (" + *place +
                     "), which could redirect the file: put it outside");
  return path;
}

Fd open_append_only(const std::string& flag, const std::string& path) {
  Fd file(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!file) {
    int error = errno;
    throw UsageError(flag + " " + path +
                     ": open(O_APPEND|O_CREAT|O_NOFOLLOW): " + errno_text(error) +
                     (error == ELOOP ? " (it is a symlink: name the file itself)" : ""));
  }
  struct stat info {};
  if (::fstat(file.get(), &info) != 0)
    throw UsageError(flag + " " + path + ": fstat: " + errno_text(errno));
  bool null_device = S_ISCHR(info.st_mode) && info.st_rdev == makedev(1, 3);
  if (!S_ISREG(info.st_mode) && !null_device)
    throw UsageError(flag + " " + path + ": not a regular file");
  return file;
}

ReplacedFile::ReplacedFile(const std::string& flag, const std::string& path) {
  fs::path absolute = fs::absolute(path);
  name_ = absolute.filename().string();
  std::string directory = absolute.parent_path().string();
  if (name_.empty() || name_ == "." || name_ == "..")
    throw UsageError(flag + " " + path + ": not a file name");
  directory_.reset(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!directory_) {
    int error = errno;
    throw UsageError(
        flag + " " + path + ": open(" + directory +
        ", O_DIRECTORY|O_NOFOLLOW): " + errno_text(error) +
        (error == ELOOP || error == ENOTDIR ? " (name the directory itself, not a symlink)" : ""));
  }
  struct stat info {};
  if (::fstatat(directory_.get(), name_.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
      !S_ISREG(info.st_mode))
    throw UsageError(flag + " " + path + ": exists and is not a regular file");
}

bool ReplacedFile::replace(const std::string& content, std::string* why) const {
  if (!directory_) return false;
  // An unpredictable name, created exclusively and never through a symlink: whatever sits
  // at a name is never written through, only a file made here.
  for (int attempt = 0; attempt < 8; ++attempt) {
    unsigned char bytes[8];
    if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
      if (why) *why = "getrandom: " + errno_text(errno);
      return false;
    }
    char suffix[17];
    for (size_t i = 0; i < sizeof bytes; ++i) std::snprintf(suffix + 2 * i, 3, "%02x", bytes[i]);
    std::string temp = "." + name_ + "." + suffix + ".tmp";
    Fd file(::openat(directory_.get(), temp.c_str(),
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!file && errno == EEXIST) continue;
    if (!file) {
      if (why) *why = "openat(" + temp + ", O_CREAT|O_EXCL|O_NOFOLLOW): " + errno_text(errno);
      return false;
    }
    size_t written = 0;
    while (written < content.size()) {
      ssize_t n = ::write(file.get(), content.data() + written, content.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (why) *why = "write(" + temp + "): " + errno_text(errno);
        ::unlinkat(directory_.get(), temp.c_str(), 0);
        return false;
      }
      written += static_cast<size_t>(n);
    }
    if (::renameat(directory_.get(), temp.c_str(), directory_.get(), name_.c_str()) != 0) {
      if (why) *why = "renameat(" + temp + ", " + name_ + "): " + errno_text(errno);
      ::unlinkat(directory_.get(), temp.c_str(), 0);
      return false;
    }
    return true;
  }
  if (why) *why = "no free temporary name after 8 tries";
  return false;
}

void refuse_untrusted_source(const Policy& policy, const std::string& flag,
                             const std::filesystem::path& path) {
  refuse_sandbox_writable(policy, flag, path.string());
  // Its directory decides only for the name: a link there may lead where the sandbox writes.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    throw UsageError(flag + " " + path.string() +
                     ": the file is a symbolic link, which could lead where the sandbox can "
                     "write: name the file itself");
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 1)
    throw UsageError(flag + " " + path.string() +
                     ": the file has another name (a hard link), which could lie where the "
                     "sandbox can write: give a file of one name");
}

void refuse_untrusted_sources(const Policy& policy) {
  if (!policy.policy_file.empty()) refuse_untrusted_source(policy, "--policy", policy.policy_file);
  for (const auto& file : policy.upstream_ca)
    refuse_untrusted_source(policy, "--upstream-ca", file);
}

}  // namespace belljar
