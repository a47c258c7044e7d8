#include "kernel/protocol/port_range.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <random>
#include <vector>

#include "sandbox/os/usage_error.hpp"

namespace belljar {

std::string PortRange::text() const {
  return std::to_string(lo) + ".." + std::to_string(hi);
}

namespace {
bool parse_port(std::string_view text, uint16_t& port) {
  unsigned value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty() || value > 65535)
    return false;
  port = static_cast<uint16_t>(value);
  return true;
}
}  // namespace

PortRange parse_port_range(const std::string& text, const std::string& flag) {
  auto bad = [&](const std::string& why) { return UsageError(flag + " " + text + ": " + why); };
  size_t dots = text.find("..");
  size_t width = 2;
  if (dots == std::string::npos) dots = text.find('-'), width = 1;
  if (dots == std::string::npos) throw bad("expected LO..HI (0..0 for any port)");
  PortRange range;
  if (!parse_port(std::string_view(text).substr(0, dots), range.lo) ||
      !parse_port(std::string_view(text).substr(dots + width), range.hi))
    throw bad("expected LO..HI with ports from 0 to 65535 (0..0 for any port)");
  if (range.any()) return range;
  if (range.lo > range.hi) throw bad("the lower port is above the upper one");
  if (range.lo < 1024) throw bad("ports below 1024 are privileged; give a range from 1024 up");
  if (range.hi - range.lo + 1 < kLaunchPorts)
    throw bad("a kernel needs " + std::to_string(kLaunchPorts) +
              " ports (five channels and the comm port)");
  return range;
}

void bind_in_range(const PortRange& range, const std::function<bool(uint16_t)>& try_bind,
                   const std::string& what) {
  if (range.any()) {
    if (try_bind(0)) return;
    throw UsageError("cannot bind " + what + " on any port");
  }
  // Every port once, in a random order: kernels started together from the same range rarely
  // try the same port twice.
  std::random_device seed;
  std::mt19937 random(seed());
  std::vector<uint16_t> ports(range.hi - range.lo + 1);
  std::iota(ports.begin(), ports.end(), range.lo);
  std::shuffle(ports.begin(), ports.end(), random);
  for (uint16_t port : ports)
    if (try_bind(port)) return;
  throw UsageError("cannot bind " + what + ": every port of --port-range " + range.text() +
                   " is taken");
}

}  // namespace belljar
