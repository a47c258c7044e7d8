// Reading the worker's framed sockets: frame_reader.hpp.
#include "kernel/session/frame_reader.hpp"

#include <unistd.h>

#include <cerrno>

namespace belljar {

bool read_frames(int fd, WorkerFrameDecoder& decoder, const bool& open, FrameSink& sink) {
  char chunk[65536];
  for (int reads = 0; reads < 256 && sink.worker_present() && open; ++reads) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return false;
    if (n < 0) break;  // EAGAIN
    take_frames(decoder, std::string_view(chunk, static_cast<size_t>(n)), sink);
  }
  return true;
}

void take_frames(WorkerFrameDecoder& decoder, std::string_view bytes, FrameSink& sink) {
  decoder.feed(bytes);
  while (sink.worker_present()) {
    auto frame = decoder.next();
    if (!frame) break;
    // One frame's handling is one boundary: whatever it throws (a field of a shape no check
    // foresaw), the worker that sent it is at fault, as for a frame that won't parse; the
    // kernel, its other sessions' state and the client's requests carry on.
    try {
      sink.read_output_before(*frame);
      sink.handle(*frame);
    } catch (const std::exception& e) {
      const std::string& type = (*frame)["type"].get_ref<const std::string&>();
      return sink.fault("its " + type.substr(0, 64) +
                        " frame could not be handled: " + std::string(e.what()).substr(0, 200));
    }
  }
  if (sink.worker_present() && !decoder.fault().empty()) return sink.fault(decoder.fault());
}

}  // namespace belljar
