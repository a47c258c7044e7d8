#include "sandbox/jail/workspace_broker.hpp"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "sandbox/jail/broker_handlers.hpp"
#include "sandbox/layers/syscall_table.hpp"
#include "sandbox/os/path_parts.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

namespace {

constexpr size_t kMaxReported = 4096;  // paths said once each; past this, said no more
// SECCOMP_IOCTL_NOTIF_SET_FLAGS and SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, newer than the headers.
constexpr unsigned long kIoctlNotifSetFlags = _IOW('!', 4, uint64_t);
constexpr uint64_t kUserNotifFdSyncWakeUp = 1;

// The dispatch table by this architecture's numbers (a call it lacks has none).
const std::unordered_map<int, BrokerHandler>& handlers_by_number() {
  static const std::unordered_map<int, BrokerHandler> handlers = [] {
    std::unordered_map<int, BrokerHandler> by_number;
    for (const auto& call : brokered_calls())
      if (int nr = native_syscall_number(call.name); nr >= 0) by_number.emplace(nr, call.handle);
    return by_number;
  }();
  return handlers;
}

}  // namespace

std::vector<std::string> read_only_patterns(const std::vector<JailBind>& binds,
                                            const std::string& workspace) {
  std::vector<std::string> patterns;
  for (const auto& bind : binds)
    if (bind.kind == JailBind::Kind::read_only)
      if (auto relative = path_below(bind.target, workspace)) patterns.push_back("/" + *relative);
  return patterns;
}

WorkspaceBroker::WorkspaceBroker(Fd listener, BrokerSettings settings, OnRefusal on_refusal)
    : listener_(std::move(listener)),
      settings_(std::move(settings)),
      memory_(std::make_unique<BrokerMemory>()),
      on_refusal_(std::move(on_refusal)) {
  workspace_parts_ = path_components(settings_.workspace);
  held_ = std::make_shared<const HeldNames>(std::move(settings_.held));
  for (const auto& root : settings_.writable_roots)
    writable_roots_.push_back(path_components(root));
  // The lease the broker takes before removing a name (LastName, broker_handlers.cpp) signals
  // its holder, the warden, with SIGIO when another open breaks it in the moment it is held:
  // SIGIO's default would end the warden, and with it the session. The warden waits on no SIGIO of
  // its own.
  if (settings_.guard_last_names) ::signal(SIGIO, SIG_IGN);
  stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_) throw_errno("eventfd");
  thread_ = std::thread([this] { serve(); });
  // Named before the warden says it is ready: the supervisor finds the thread by this name and
  // charges its CPU to the session (worker_process.cpp, kBrokerThreadName).
  ::pthread_setname_np(thread_.native_handle(), kBrokerThreadName);
}

WorkspaceBroker::~WorkspaceBroker() {
  uint64_t one = 1;
  ssize_t ignored = ::write(stop_.get(), &one, sizeof one);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
}

void WorkspaceBroker::refuse_once(BrokerRefusal refusal) {
  if (reported_.size() >= kMaxReported || !reported_.insert(refusal.path).second) return;
  on_refusal_(refusal);
}

void WorkspaceBroker::serve() {
  if (settings_.switch_ids) {
    // This thread alone (raw calls: glibc would change every thread's): the sandbox's host
    // identity for what it makes, and none of root's file capabilities, which a change of
    // fsuid away from 0 drops.
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 ||
        ::syscall(SYS_setfsgid, settings_.host_gid) < 0 ||
        ::syscall(SYS_setfsuid, settings_.host_uid) < 0) {
      listener_.reset();  // no listener: every brokered call fails (ENOSYS), none is made
      return;
    }
  }
  // A umask of this thread's own, for the unix sockets it binds for the caller (a container
  // profile may refuse unshare: the socket's mode is then set after the bind).
  own_umask_ = ::unshare(CLONE_FS) == 0;
  seccomp_notif_sizes sizes{};
  if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) {
    listener_.reset();
    return;
  }
  // Linux 6.6+: the caller and the broker hand the CPU to each other, as a pipe's two ends
  // would, rather than waking each other across CPUs (most of a brokered call's cost in a VM).
  // Best effort: older kernels answer EINVAL and wake as before.
  uint64_t sync_wake_up = kUserNotifFdSyncWakeUp;
  ::ioctl(listener_.get(), kIoctlNotifSetFlags, sync_wake_up);
  std::vector<unsigned char> buffer(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
  for (;;) {
    LocatedFolders& located = memory_->located;
    pollfd fds[3] = {
        {listener_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}, {located.watch_fd(), POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (fds[2].revents && located.moved()) invalidate();  // before the call that came with it
    if (!(fds[0].revents & POLLIN)) {
      if (fds[0].revents & (POLLHUP | POLLERR)) return;  // no process is left under the filter
      continue;
    }
    std::memset(buffer.data(), 0, buffer.size());
    auto* request = reinterpret_cast<seccomp_notif*>(buffer.data());
    if (::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_RECV, request) != 0) {
      if (errno == EINTR || errno == ENOENT) continue;  // the caller went first
      return;
    }
    BrokerCall call;
    call.id = request->id;
    call.pid = static_cast<pid_t>(request->pid);
    call.nr = request->data.nr;
    std::memcpy(call.args, request->data.args, sizeof call.args);
    call.listener = listener_.get();
    answer(call);
    if (!call.answered) call.reply(EACCES);
  }
}

void WorkspaceBroker::hold(HeldNames held) {
  auto fresh = std::make_shared<const HeldNames>(std::move(held));
  std::lock_guard<std::mutex> lock(held_mutex_);
  held_ = std::move(fresh);
}

void WorkspaceBroker::answer(BrokerCall& call) {
  if (!root_) {
    root_.reset(::open(proc_path(call.pid, "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root_ || !call.still_waiting()) {
      root_.reset();
      return call.reply(EACCES);
    }
  }
  const auto& handlers = handlers_by_number();
  auto handler = handlers.find(call.nr);
  if (handler == handlers.end()) return call.reply(ENOSYS);
  std::shared_ptr<const HeldNames> held;
  {
    std::lock_guard<std::mutex> lock(held_mutex_);
    held = held_;
  }
  BrokerScene scene{settings_,   workspace_parts_, writable_roots_,
                    root_.get(), own_umask_,       held.get()};
  BrokerAnswer answer(call, scene, *memory_, generation_, mount_changes_,
                      [this](BrokerRefusal refusal) { refuse_once(std::move(refusal)); });
  handler->second(answer);
}

}  // namespace belljar
