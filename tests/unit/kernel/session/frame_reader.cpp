// Reading a worker's framed socket alone, on a real socketpair and a fake sink: frames are handled
// in order, the pipes' text read before each; a frame whose handling throws faults the worker,
// naming its type, and nothing after it in the turn is handled; a frame that won't parse faults
// it too; EOF is told; once the worker is gone nothing more is read.
#include "kernel/session/frame_reader.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <stdexcept>
#include <vector>

#include "sandbox/os/fd.hpp"

using namespace belljar;
using json = nlohmann::json;

namespace {

class FakeSink final : public FrameSink {
 public:
  bool worker_present() const override { return present; }
  void read_output_before(const json& frame) override {
    seen.push_back("before " + frame["type"].get<std::string>());
  }
  void handle(const json& frame) override {
    seen.push_back("handle " + frame["type"].get<std::string>());
    if (frame["type"] == "boom") throw std::runtime_error("a field of no foreseen shape");
  }
  void fault(const std::string& why) override { faults.push_back(why); }

  bool present = true;
  std::vector<std::string> seen, faults;
};

struct Pair {
  Pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
    ours = Fd(fds[0]);
    theirs = Fd(fds[1]);
  }
  void write(const std::string& bytes) {
    REQUIRE(::write(theirs.get(), bytes.data(), bytes.size()) ==
            static_cast<ssize_t>(bytes.size()));
  }
  Fd ours, theirs;
};

}  // namespace

TEST_CASE("frame reader: frames are handled in order, the pipes' text read before each",
          "[frame_reader]") {
  Pair pair;
  pair.write(encode_worker_frame({{"type", "display"}}) + encode_worker_frame({{"type", "done"}}));
  WorkerFrameDecoder decoder;
  FakeSink sink;
  bool open = true;
  CHECK(read_frames(pair.ours.get(), decoder, open, sink));
  CHECK(sink.seen ==
        std::vector<std::string>{"before display", "handle display", "before done", "handle done"});
  CHECK(sink.faults.empty());
}

TEST_CASE("frame reader: a frame whose handling throws faults the worker, and the turn ends there",
          "[frame_reader]") {
  WorkerFrameDecoder decoder;
  FakeSink sink;
  take_frames(decoder,
              encode_worker_frame({{"type", "boom"}}) + encode_worker_frame({{"type", "done"}}),
              sink);
  REQUIRE(sink.faults.size() == 1);
  CHECK(sink.faults[0].find("its boom frame could not be handled") != std::string::npos);
  CHECK(sink.seen == std::vector<std::string>{"before boom", "handle boom"});
}

TEST_CASE("frame reader: a frame that won't parse faults the worker", "[frame_reader]") {
  WorkerFrameDecoder decoder;
  FakeSink sink;
  std::string frame = encode_worker_frame({{"type", "display"}});
  frame.back() = '{';  // the body is no longer JSON
  take_frames(decoder, frame, sink);
  CHECK(sink.faults.size() == 1);
  CHECK(sink.seen.empty());
}

TEST_CASE("frame reader: EOF is told, and a worker that is gone is read no more",
          "[frame_reader]") {
  Pair pair;
  WorkerFrameDecoder decoder;
  FakeSink sink;
  bool open = true;
  pair.write(encode_worker_frame({{"type", "display"}}));
  sink.present = false;
  CHECK(read_frames(pair.ours.get(), decoder, open, sink));
  CHECK(sink.seen.empty());
  sink.present = true;
  open = false;  // polled no more: not read either
  CHECK(read_frames(pair.ours.get(), decoder, open, sink));
  CHECK(sink.seen.empty());
  open = true;
  pair.theirs.reset();
  CHECK_FALSE(read_frames(pair.ours.get(), decoder, open, sink));
  CHECK(sink.seen == std::vector<std::string>{"before display", "handle display"});
}
