#include "sandbox/layers/user_namespace.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

void write_file(const std::string& path, const std::string& text) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) throw_errno("open(" + path + ")");
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw_errno("write(" + path + ", \"" + text.substr(0, text.size() - 1) + "\")");
}

}  // namespace

void write_id_maps(pid_t pid, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid,
                   gid_t outside_gid, bool deny_setgroups) {
  const std::string proc = "/proc/" + std::to_string(pid);
  write_file(proc + "/uid_map",
             std::to_string(inside_uid) + " " + std::to_string(outside_uid) + " 1\n");
  if (deny_setgroups) write_file(proc + "/setgroups", "deny\n");
  write_file(proc + "/gid_map",
             std::to_string(inside_gid) + " " + std::to_string(outside_gid) + " 1\n");
}

Fd make_idmap_userns(uid_t on_disk_uid, uid_t shown_uid, gid_t on_disk_gid, gid_t shown_gid) {
  // A child unshares a user namespace and waits; we map it and keep a handle on the namespace.
  // The child only calls async-signal-safe functions: the caller may be multi-threaded.
  int ready[2], hold[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) throw_errno("pipe2");
  Fd ready_r(ready[0]), ready_w(ready[1]);
  if (::pipe2(hold, O_CLOEXEC) != 0) throw_errno("pipe2");
  Fd hold_r(hold[0]), hold_w(hold[1]);
  pid_t child = ::fork();
  if (child < 0) throw_errno("fork");
  if (child == 0) {
    char byte = ::unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
    if (::write(ready[1], &byte, 1) != 1) _exit(1);
    ::close(hold[1]);
    ::read(hold[0], &byte, 1);  // returns at EOF: the parent is done with us
    _exit(0);
  }
  ready_w.reset();
  hold_r.reset();
  auto reap = [&] {
    hold_w.reset();
    int status;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  };
  char byte = 0;
  if (::read(ready_r.get(), &byte, 1) != 1 || byte != 'y') {
    reap();
    throw SetupError("unshare(CLONE_NEWUSER) for the workspace's idmapped mount failed");
  }
  Fd ns;
  try {
    write_id_maps(child, on_disk_uid, shown_uid, on_disk_gid, shown_gid, false);
    std::string path = "/proc/" + std::to_string(child) + "/ns/user";
    ns.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) throw_errno("open(" + path + ")");
  } catch (...) {
    reap();
    throw;
  }
  reap();
  return ns;
}

}  // namespace belljar
