#include "kernel/protocol/replay_guard.hpp"

#include <algorithm>
#include <bit>
#include <functional>

namespace belljar {

namespace {
constexpr size_t kFirstSlots = 64;

uint64_t fingerprint(std::string_view signature) {
  return std::hash<std::string_view>{}(signature);
}
}  // namespace

ReplayGuard::ReplayGuard(size_t capacity)
    : capacity_(std::clamp<size_t>(capacity, 1, kEmpty - 1)),  // positions fit 32 bits
      slots_(kFirstSlots, kEmpty),
      mask_(kFirstSlots - 1),
      max_slots_(std::max(kFirstSlots, std::bit_ceil(2 * capacity_))) {
  order_.reserve(capacity_);  // pages are touched as the ring fills, not now
}

void ReplayGuard::grow() {
  slots_.assign(slots_.size() * 2, kEmpty);
  mask_ = slots_.size() - 1;
  for (size_t position = 0; position < order_.size(); ++position)
    slots_[find(order_[position])] = static_cast<uint32_t>(position);
}

size_t ReplayGuard::find(uint64_t fingerprint) const {
  size_t slot = fingerprint & mask_;
  while (slots_[slot] != kEmpty && order_[slots_[slot]] != fingerprint) slot = (slot + 1) & mask_;
  return slot;
}

// Backward-shift deletion: entries after the freed slot move up unless that would put one
// before its home slot, so every entry stays reachable from its home without tombstones.
void ReplayGuard::erase_slot(size_t slot) {
  for (size_t next = (slot + 1) & mask_; slots_[next] != kEmpty; next = (next + 1) & mask_) {
    size_t home = order_[slots_[next]] & mask_;
    bool home_between =
        slot <= next ? (slot < home && home <= next) : (slot < home || home <= next);
    if (home_between) continue;  // already as close to its home as it can be
    slots_[slot] = slots_[next];
    slot = next;
  }
  slots_[slot] = kEmpty;
}

bool ReplayGuard::admit(std::string_view signature) {
  uint64_t print = fingerprint(signature);
  size_t slot = find(print);
  if (slots_[slot] != kEmpty) return false;
  size_t position = order_.size();
  if (position < capacity_) {
    if (2 * (position + 1) > slots_.size() && slots_.size() < max_slots_) {
      grow();
      slot = find(print);
    }
    order_.push_back(print);
  } else {
    // Full: the oldest fingerprint is forgotten and its place in the ring reused.
    position = oldest_;
    erase_slot(find(order_[position]));
    order_[position] = print;
    oldest_ = (oldest_ + 1) % capacity_;
    slot = find(print);  // the erase may have moved entries into the slot found before
  }
  slots_[slot] = static_cast<uint32_t>(position);
  return true;
}

}  // namespace belljar
