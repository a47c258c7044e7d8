#pragma once
// Remembers recent signatures so a captured message can't be sent again (jupyter_client keeps
// the same kind of digest history, 2^16 of them). Bounded: the oldest signatures are forgotten
// first.
// Every message a client sends passes here, so what it keeps is what a long session pays per
// cell: the 64-hex-digit strings in a set and a queue cost about 215 bytes a message (14 MB at
// the capacity). It keeps a 64-bit fingerprint of each signature instead: in a ring, oldest
// first (8 bytes a message, 512 KiB at the capacity), and in an open-addressed table of ring
// positions that doubles as the ring fills (512 KiB at the capacity), so an idle session, of
// which a host runs hundreds, holds a few kilobytes; nothing is allocated per message. A replay has
// the same fingerprint, so it is always caught; a new signature is refused only if its fingerprint
// equals a remembered one, a chance of 2^16 in 2^64. Only signatures the Signer verified reach
// the guard, and choosing one would take the key, so nobody can aim for that chance (or crowd
// one slot of the table).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace belljar {

class ReplayGuard {
 public:
  explicit ReplayGuard(size_t capacity = 1 << 16);
  // True the first time a signature is seen; false for a replay.
  bool admit(std::string_view signature);
  size_t size() const { return order_.size(); }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  // The slot holding the ring position of `fingerprint`, or the empty slot where it would go.
  size_t find(uint64_t fingerprint) const;
  void erase_slot(size_t slot);
  // Twice the slots, every remembered fingerprint placed again.
  void grow();

  size_t capacity_;
  std::vector<uint64_t> order_;  // fingerprints, a ring once full: the oldest at oldest_
  size_t oldest_ = 0;
  std::vector<uint32_t> slots_;  // positions in order_, linear probing; kEmpty: free
  size_t mask_;
  size_t max_slots_;  // at most half full at the capacity: short probes
};

}  // namespace belljar
