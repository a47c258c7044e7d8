#include "kernel/session/worker_channel.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "kernel/protocol/buffer_room.hpp"
#include "kernel/session/worker_frames.hpp"

namespace belljar {

namespace {
// The frame's `written`: two unsigned counts, or nothing.
bool counts_of(const nlohmann::json& frame, std::array<uint64_t, 2>& counts) {
  auto cursor = frame.find("written");
  if (cursor == frame.end() || !cursor->is_array() || cursor->size() != 2) return false;
  for (size_t i = 0; i < 2; ++i) {
    if (!(*cursor)[i].is_number_unsigned()) return false;
    counts[i] = (*cursor)[i].get<uint64_t>();
  }
  return true;
}
}  // namespace

bool WorkerOutbox::queue(const nlohmann::json& frame) {
  if (bytes_.size() > kMaxBytes) return false;
  bytes_ += encode_worker_frame(frame);
  return true;
}

bool WorkerOutbox::flush(int fd) {
  while (!bytes_.empty()) {
    ssize_t n = ::write(fd, bytes_.data(), bytes_.size());
    if (n > 0) {
      bytes_.erase(0, static_cast<size_t>(n));
      give_back_room(bytes_);  // a cell's megabytes of code are not kept once sent
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || errno == EAGAIN) return true;  // the worker reads on; later
    bytes_.clear();
    return false;
  }
  return true;
}

std::array<uint64_t, 2> OutputCursors::due_before(const nlohmann::json& frame,
                                                  uint64_t most) const {
  std::array<uint64_t, 2> counts{}, due{0, 0};
  if (!counts_of(frame, counts)) return due;
  for (size_t i = 0; i < 2; ++i) {
    uint64_t target = counts[i] + uncounted_[i];
    if (target > read_[i]) due[i] = std::min(target - read_[i], most);
  }
  return due;
}

void OutputCursors::learn_at_done(const nlohmann::json& done) {
  std::array<uint64_t, 2> counts{};
  if (!counts_of(done, counts)) return;
  for (size_t i = 0; i < 2; ++i) uncounted_[i] = read_[i] > counts[i] ? read_[i] - counts[i] : 0;
}

}  // namespace belljar
