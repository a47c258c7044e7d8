#pragma once
// The ports a remote kernel may listen on. A gateway (Jupyter Enterprise Gateway,
// gateway_provisioners) hands its kernels a range like "40000..40100" because only those
// ports are open between the gateway and the pod; "0..0" means any port. Each port is picked
// at random within the range and bound at once, so two kernels sharing a range never race
// for the same port between choosing and binding.
#include <cstdint>
#include <functional>
#include <string>

namespace belljar {

struct PortRange {
  uint16_t lo = 0, hi = 0;  // inclusive; both 0: any port the system gives
  bool any() const { return lo == 0 && hi == 0; }
  std::string text() const;  // "LO..HI", as given
};

// The five Jupyter channels and the gateway's comm port.
inline constexpr int kLaunchPorts = 6;

// "LO..HI" (or "LO-HI"); throws UsageError naming the flag on anything else, on a range that
// is backwards, reaches below 1024 or holds fewer than kLaunchPorts ports.
PortRange parse_port_range(const std::string& text, const std::string& flag);

// Tries ports of the range in a random order until try_bind(port) succeeds (it returns false
// when the port is taken, and records what it bound); throws UsageError once every port of the
// range was tried. For an `any` range try_bind is called once, with 0.
void bind_in_range(const PortRange& range, const std::function<bool(uint16_t)>& try_bind,
                   const std::string& what);

}  // namespace belljar
