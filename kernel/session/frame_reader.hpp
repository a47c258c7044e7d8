#pragma once
// Reading the worker's framed sockets (fd 3, and the debug channel on fd 4, framed alike): a
// turn's worth of bytes, decoded (worker_frames.hpp) and handed on one frame at a time. Shared by
// the worker link and the debugger link, so both channels keep the same bounds.
//
// The worker is the attacker: it decides how much it writes and what. So one turn reads at most
// 256 chunks (the reactor serves the clients between turns), each frame's handling is one
// boundary (a frame whose handling throws is the worker's fault, as one that won't parse: the
// kernel and the clients' requests carry on), a decoder's fault faults the worker, and once the
// worker is gone (a handler may drop it) nothing more is read or handled.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kernel/session/worker_frames.hpp"

namespace belljar {

// Where a channel's frames go, and what reading them needs from around it.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // False once the worker is gone: nothing more is read or handled.
  virtual bool worker_present() const = 0;
  // The pipes' text written before `frame` is shown before it (worker_channel.hpp).
  virtual void read_output_before(const nlohmann::json& frame) = 0;
  virtual void handle(const nlohmann::json& frame) = 0;
  // The worker broke a bound (WorkerDoor::fault).
  virtual void fault(const std::string& why) = 0;
};

// `bytes` decoded and each frame handled by `sink`, each a boundary.
void take_frames(WorkerFrameDecoder& decoder, std::string_view bytes, FrameSink& sink);
// A turn's worth of what `fd` holds (non-blocking), handed to take_frames while `open` holds;
// false at EOF.
bool read_frames(int fd, WorkerFrameDecoder& decoder, const bool& open, FrameSink& sink);

}  // namespace belljar
