#include "kernel/observability/audit_destination.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>

#include "kernel/observability/host_files.hpp"
#include "sandbox/os/path_parts.hpp"

namespace belljar {

namespace {

constexpr const char* kBelljar = "belljar";

std::string joined(const std::string& directory, const std::string& name) {
  return directory + (directory.empty() || directory.back() != '/' ? "/" : "") + name;
}

// "open(/x): Permission denied"; `error` taken before the text is built, which may reset errno.
std::string failed(const std::string& call, int error) {
  return call + ": " + std::strerror(error);
}

// The state directory opened, or why it can't be had.
struct OpenedDirectory {
  Fd fd;
  std::string path;  // where it really is, once judged
  std::string why_not;
};

OpenedDirectory refused(std::string why) {
  return {Fd(), "", std::move(why)};
}

// Why `path`, which is `resolved` once its links are followed, is no place for the log: it lies
// where the sandbox of `policy` can write. nullopt when it does not.
std::optional<std::string> in_sandbox_reach(const Policy& policy, const std::string& path,
                                            const std::string& resolved) {
  auto where = sandbox_writable_place(policy, resolved);
  if (!where) return std::nullopt;
  return path + (resolved == path ? " is in " : " leads to " + resolved + " in ") + *where +
         ", which the sandbox can write";
}

// The existing part as it is (a home may be a symlink the user made); each name below it made
// 0700 when missing, and a name made here entered without following a link, so nothing swapped
// in between mkdirat and openat is entered.
OpenedDirectory make_state_directory(const StateDirectory& place) {
  Fd dir(::open(place.existing.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    int error = errno;
    return refused(failed("open(" + place.existing + ")", error));
  }
  std::string at = place.existing;
  for (const std::string& name : place.made) {
    at = joined(at, name);
    bool made = ::mkdirat(dir.get(), name.c_str(), 0700) == 0;
    if (!made && errno != EEXIST) {
      int error = errno;
      return refused(failed("mkdir(" + at + ")", error));
    }
    Fd next(::openat(dir.get(), name.c_str(),
                     O_RDONLY | O_DIRECTORY | O_CLOEXEC | (made ? O_NOFOLLOW : 0)));
    if (!next) {
      int error = errno;
      return refused(failed("open(" + at + ")", error));
    }
    dir = std::move(next);
  }
  return {std::move(dir), at, ""};
}

// Why directory `dir`, named `path` and really at `real`, is no place for the log: a symlink
// on the way, the user's or not, may lead where the sandbox writes; and whoever else may write
// there could replace the log or plant links for the next kernel. nullopt when it is fit.
std::optional<std::string> unfit_for_the_log(const Policy& policy, const std::string& path,
                                             const std::string& real, int dir) {
  if (auto why = in_sandbox_reach(policy, path, real)) return why;
  struct stat info {};
  if (::fstat(dir, &info) != 0) {
    int error = errno;
    return failed("fstat(" + real + ")", error);
  }
  if (info.st_uid != ::geteuid())
    return real + " belongs to uid " + std::to_string(info.st_uid) + ", not to " +
           std::to_string(::geteuid());
  if (info.st_mode & (S_IWGRP | S_IWOTH))
    return real + " is writable by its group or by others: chmod go-w";
  return std::nullopt;
}

// The state directory, made if missing, where the log may go; or why not.
OpenedDirectory open_state_directory(const StateDirectory& place, const Policy& policy) {
  if (!place.unusable.empty()) return refused(place.unusable);
  const std::string path = place.path();
  // Before anything is made: no directory of ours appears where the sandbox writes.
  std::error_code ec;
  std::string resolved = std::filesystem::weakly_canonical(path, ec).string();
  if (auto why = in_sandbox_reach(policy, path, ec ? path : resolved)) return refused(*why);
  OpenedDirectory opened = make_state_directory(place);
  if (!opened.fd) return opened;
  // Judged where it really is, as opened: the check above saw only names.
  auto real = descriptor_path(opened.fd.get());
  if (!real) {
    int error = errno;
    return refused(failed("readlink(/proc/self/fd) of " + path, error));
  }
  if (auto why = unfit_for_the_log(policy, path, *real, opened.fd.get())) return refused(*why);
  opened.path = *real;
  return opened;
}

// "20250102T030405Z": file names sort by start time.
std::string utc_stamp() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

std::string log_file_name(const std::string& stamp, const std::string& kernel_id) {
  return "audit-" + stamp + "-" + kernel_id + ".jsonl";
}

}  // namespace

std::string StateDirectory::path() const {
  std::string path = existing;
  for (const auto& name : made) path = joined(path, name);
  return path;
}

StateDirectory state_directory(const Getenv& getenv) {
  StateDirectory place;
  const char* xdg = getenv("XDG_STATE_HOME");
  if (xdg && xdg[0] == '/') {
    std::vector<std::string> names = path_components(xdg);
    bool plain = true;
    for (const auto& name : names) plain = plain && name != "..";
    if (plain) {
      // Its parent must be there; XDG_STATE_HOME itself is made if missing, as the spec asks.
      place.existing = "/";
      for (size_t i = 0; i + 1 < names.size(); ++i)
        place.existing = joined(place.existing, names[i]);
      if (!names.empty()) place.made.push_back(names.back());
      place.made.push_back(kBelljar);
      return place;
    }
  }
  const char* home = getenv("HOME");
  if (!home || !*home) {
    place.unusable = "HOME is not set";
  } else if (home[0] != '/') {
    place.unusable = std::string("HOME is not an absolute path: ") + home;
  } else {
    place.existing = home;
    place.made = {".local", "state", kBelljar};
  }
  return place;
}

AuditDestination open_audit_destination(const Policy& policy, const std::string& kernel_id,
                                        const Getenv& getenv) {
  const std::string& asked = policy.audit_log;
  if (asked == kAuditLogStderr) return {Fd(), "stderr", ""};
  if (!asked.empty())
    return {open_append_only("--audit-log", refuse_sandbox_writable(policy, "--audit-log", asked)),
            asked, ""};
  OpenedDirectory dir = open_state_directory(state_directory(getenv), policy);
  if (!dir.fd) return {Fd(), "stderr", dir.why_not};
  // A name no one had: created here, never through a link, never an existing file appended to.
  std::string name = log_file_name(utc_stamp(), kernel_id);
  Fd file(::openat(dir.fd.get(), name.c_str(),
                   O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!file) {
    int error = errno;
    return {Fd(), "stderr", failed("open(" + joined(dir.path, name) + ", O_EXCL)", error)};
  }
  return {std::move(file), joined(dir.path, name), ""};
}

std::string fallback_warning(const std::string& why) {
  return "warning: the audit log goes to stderr, not to the state directory: " + why +
         ". --audit-log FILE (outside the workspace) names a file; --audit-log - keeps stderr "
         "without this warning";
}

std::string describe_audit_destination(const Policy& policy, const Getenv& getenv) {
  const std::string& asked = policy.audit_log;
  if (asked == kAuditLogStderr) return "stderr (--audit-log -)";
  if (!asked.empty()) return refuse_sandbox_writable(policy, "--audit-log", asked);
  OpenedDirectory dir = open_state_directory(state_directory(getenv), policy);
  if (!dir.fd) return "stderr, not the state directory: " + dir.why_not;
  return joined(dir.path, log_file_name("<start>", "<kernel>")) +
         ", a file per kernel (belljar launch: stderr; belljar run: none)";
}

}  // namespace belljar
