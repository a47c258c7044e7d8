#include "sandbox/layers/loopback.hpp"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstring>

#include "sandbox/os/fd.hpp"
#include "sandbox/os/setup_error.hpp"

namespace belljar {

void bring_up_loopback() {
  Fd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) throw_errno("socket(AF_INET, SOCK_DGRAM) for lo");
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &request) != 0) throw_errno("ioctl(lo, SIOCGIFFLAGS)");
  request.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &request) != 0)
    throw_errno("ioctl(lo, SIOCSIFFLAGS, IFF_UP)");
}

}  // namespace belljar
