// belljar-jail, the jail helper: the process tree of the sandbox (warden, init, the worker's
// last steps before Python) in an executable of its own. The supervisor starts it for every
// sandbox (sandbox/jail_client/worker_process.cpp): forked, then exec'd from the helper it
// opened at start (sandbox/jail_client/jail_helper.cpp), so no jail setup runs in the
// multi-threaded supervisor. It links libc, libseccomp and the C++ runtime, statically, and
// nothing else: no ZMQ, no OpenSSL, no JSON. What it is told and what it says are records
// (sandbox/jail_protocol/).
//
// Descriptors on entry: 0-3 the worker's (stdin /dev/null, stdout, stderr, frames), 4 the
// control socket (kControlFd), 5 the egress channel when the policy allows any host, 6 the
// worker's debug channel (kDebugChannelFd).
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sandbox/jail/warden.hpp"
#include "sandbox/jail_protocol/jail_spec.hpp"

// The linker's bounds of this executable's own image (text, read-only data, data).
extern "C" char __executable_start, _end;

namespace {

// The helper runs a small part of its code in any one sandbox's life, and a warden and an init
// live for as long as their session, so what counts is what they keep resident. By default
// every page fault on the executable maps up to 16 neighbouring pages that happen to be
// cached ("fault-around"); MADV_RANDOM turns that off for our own image, so only pages the
// jail actually runs stay mapped. The cost is a few hundred more minor faults at setup.
void map_only_what_runs() {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t start = reinterpret_cast<uintptr_t>(&__executable_start) & ~(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(&_end);
  // Holes between the segments make madvise answer ENOMEM after advising every mapping.
  (void)::madvise(reinterpret_cast<void*>(start), end - start, MADV_RANDOM);
}

// Without stdio's printf: the helper links none of it (its wide-character and floating-point
// machinery would be mapped in every warden for two lines of text).
void say(int fd, const std::string& text) {
  ssize_t ignored = ::write(fd, text.data(), text.size());
  (void)ignored;
}

}  // namespace

int main(int argc, char** argv) {
  map_only_what_runs();
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    say(1, "belljar-jail " BELLJAR_VERSION " (jail protocol " +
               std::to_string(belljar::kJailProtocolVersion) + ")\n");
    return 0;
  }
  struct stat st {};
  if (argc != 1 || ::fstat(belljar::kControlFd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    say(2, "belljar-jail: the jail helper of belljar " BELLJAR_VERSION
           ", started by the kernel for each sandbox; it is not a command of its own\n");
    return 2;
  }
  // The debug channel must be there: were fd 6 free, a descriptor the warden opens later could
  // land on it and be handed to the worker as its fd 4.
  if (::fstat(belljar::kDebugChannelFd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    say(2,
        "belljar-jail: no debug channel on fd 6: the kernel that started this helper is "
        "from another build of belljar " BELLJAR_VERSION "\n");
    return 2;
  }
  // What `ps` shows for it; init renames itself in turn (jail_init.cpp).
  ::prctl(PR_SET_NAME, "belljar-warden", 0, 0, 0);
  return belljar::run_warden(belljar::kControlFd);
}
