// What a brokered call costs on this machine before the broker does any work: one thread
// makes a call a seccomp filter hands to a listener on another thread, which answers it at
// once, (a) with a plain reply and (b) with a descriptor handed back the way a brokered open()
// is (SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SEND). Between calls the caller works
// for 20 µs, as a cell does between the files it makes. Prints one JSON object of microseconds
// per call; bench/workspace.py puts it beside the broker's figures, so a reader can tell the
// broker's own work from what the kernel's hand-over costs (on a VM whose idle CPUs halt at
// once, a cross-CPU wake-up is tens of µs, and only the plain reply can ask for a same-CPU one).
//
// Nothing here is belljar's code: it measures the kernel's mechanism alone.
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>

namespace {

constexpr int kCalls = 20000;
constexpr auto kWork = std::chrono::microseconds(20);
constexpr unsigned long kIoctlNotifSetFlags = _IOW('!', 4, uint64_t);  // Linux 6.6
constexpr uint64_t kSyncWakeUp = 1;  // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP

using Clock = std::chrono::steady_clock;

// The call the filter hands over: mkdirat on a path that cannot exist, so that without the
// filter it fails at once and with it nothing is ever made.
long probe() {
  return ::syscall(SYS_mkdirat, AT_FDCWD, "/nonexistent-belljar-floor/x", 0700);
}

void work() {
  auto until = Clock::now() + kWork;
  while (Clock::now() < until) {
  }
}

// µs per call of kCalls probes, with work between them.
double per_call(bool hands_back_fd) {
  auto start = Clock::now();
  for (int i = 0; i < kCalls; ++i) {
    long fd = probe();
    if (hands_back_fd && fd >= 0) ::close(static_cast<int>(fd));
    work();
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kCalls;
}

}  // namespace

int main() {
  double plain = per_call(false);

  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mkdirat, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::perror("prctl"), 1;
  int listener = static_cast<int>(
      ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &program));
  if (listener < 0) return std::perror("seccomp"), 1;
  bool sync = ::ioctl(listener, kIoctlNotifSetFlags, kSyncWakeUp) == 0;

  std::atomic<bool> hand_back_fd{false};
  int handed = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  std::thread answerer([&] {
    seccomp_notif request{};
    for (;;) {
      pollfd ready{listener, POLLIN, 0};
      if (::poll(&ready, 1, -1) < 0 && errno != EINTR) return;
      if (ready.revents & (POLLHUP | POLLERR)) return;
      std::memset(&request, 0, sizeof request);
      if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &request) != 0) continue;
      if (hand_back_fd) {
        seccomp_notif_addfd add{};
        add.id = request.id;
        add.flags = SECCOMP_ADDFD_FLAG_SEND;
        add.srcfd = static_cast<uint32_t>(handed);
        add.newfd_flags = O_CLOEXEC;
        ::ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
      } else {
        seccomp_notif_resp reply{};
        reply.id = request.id;
        reply.error = -EEXIST;
        ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &reply);
      }
    }
  });
  answerer.detach();  // the process ends with it blocked in poll

  double replied = per_call(false);
  hand_back_fd = true;
  double with_fd = per_call(true);
  // What handing the call over adds to each call, over the same loop unfiltered.
  std::printf("{\"reply_added_us\": %.1f, \"fd_added_us\": %.1f, \"sync_wake_up\": %s}\n",
              replied - plain, with_fd - plain, sync ? "true" : "false");
  return 0;
}
