#pragma once
// The supervisor's end of the worker's channel, in two small parts with one job each, tested
// alone (tests/unit/kernel/session/worker_channel.cpp); the worker link (worker_link.hpp) holds
// them.
//
// WorkerOutbox: frames for the worker, written as its socket takes them. An honest worker reads
// each reply before it asks again; one that keeps asking without reading would grow the queue
// without end, so past kMaxBytes queued the worker is at fault.
//
// OutputCursors: where the worker's frames fall in its text. fd 1 and 2 are pipes read apart
// from the frames; each frame says how much its streams had written when it was sent
// (`written`), so that much is shown before the frame and no more. Bytes written around the
// streams (a subprocess, C code) are not counted: the cursor is a lower bound, corrected by what
// the pipes held beyond it at the last `done` (worker/PROTOCOL.md, "Text and frames in order").
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace belljar {

class WorkerOutbox {
 public:
  static constexpr size_t kMaxBytes = 8u << 20;  // queued for a worker that is not reading

  // false, queuing nothing, when the worker has left more than kMaxBytes unread: a fault.
  bool queue(const nlohmann::json& frame);
  // Writes what `fd` takes now (non-blocking); false when the worker is gone (the queue is
  // dropped: its exit reports it).
  bool flush(int fd);
  bool empty() const { return bytes_.empty(); }
  size_t size() const { return bytes_.size(); }
  void clear() { bytes_.clear(); }

 private:
  std::string bytes_;
};

class OutputCursors {
 public:
  // A new worker: nothing read, nothing learnt.
  void reset() { read_ = uncounted_ = {0, 0}; }
  // `n` bytes were read from pipe `index` (0: fd 1, 1: fd 2).
  void read(int index, uint64_t n) { read_[index] += n; }
  uint64_t read_so_far(int index) const { return read_[index]; }
  // How much more to read from each pipe before `frame` is handled (at most `most`): nothing
  // for a frame whose `written` is missing or malformed.
  std::array<uint64_t, 2> due_before(const nlohmann::json& frame, uint64_t most) const;
  // At `done` the pipes were read to their end: what they held beyond the worker's own count
  // was written around its streams, and later cursors move by that much.
  void learn_at_done(const nlohmann::json& done);

 private:
  std::array<uint64_t, 2> read_{0, 0}, uncounted_{0, 0};
};

}  // namespace belljar
