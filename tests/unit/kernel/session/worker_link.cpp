// The worker link alone, on a real socketpair for fd 3 and real pipes for fd 1 and 2, with fake
// doors and a fake core: frames go out through the outbox and come in to the core in order, the
// pipes' text written before a frame shown before it and no more; the text is redacted and
// published under the parent the core names; a worker that leaves its outbox unread past the
// bound, or closes fd 3 and runs on past the grace, is at fault: the channel closes at once, the
// fault is audited, and the core is told to end the sandbox.
#include "kernel/session/worker_link.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <vector>

#include "kernel/session/fake_doors.hpp"
#include "sandbox/os/fd.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;
using Clock = WorkerLink::Clock;

namespace {

class FakeCore final : public WorkerLink::Core {
 public:
  OutputBudget& output_budget() override { return budget; }
  const WireMessage* background_parent() const override { return &parent; }
  void text_read() override { ++reads; }
  void handle(const json& frame) override { frames.push_back(frame); }
  void faulted() override { ++faults; }

  OutputBudget budget;
  WireMessage parent = request("execute_request", "cell-1");
  std::vector<json> frames;
  int reads = 0, faults = 0;
};

// The worker's side: fd 3's other end, and the write ends of its fd 1 and 2.
struct Worker {
  Worker() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    frames_ours = Fd(fds[0]);
    frames = Fd(fds[1]);
    for (int i = 0; i < 2; ++i) {
      REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
      pipes_ours[i] = Fd(fds[0]);
      pipes[i] = Fd(fds[1]);
    }
  }
  void write_frame(const json& frame) {
    std::string bytes = encode_worker_frame(frame);
    REQUIRE(::write(frames.get(), bytes.data(), bytes.size()) ==
            static_cast<ssize_t>(bytes.size()));
  }
  void print(int index, const std::string& text) {
    REQUIRE(::write(pipes[index].get(), text.data(), text.size()) ==
            static_cast<ssize_t>(text.size()));
  }
  std::string read_frames_sent() {
    std::string got(1 << 16, '\0');
    ssize_t n = ::recv(frames.get(), got.data(), got.size(), MSG_DONTWAIT);
    got.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return got;
  }
  Fd frames_ours, frames, pipes_ours[2], pipes[2];
};

struct Rig {
  FakeClient client;
  FakeAudit audit;
  RateLimitedLog log{10};
  Redactor redactor{std::vector<std::string>{"sk-live-0123456789abcdef"}};
  FakeCore core;
  WorkerLink link{client, audit, log, redactor, core};
  Worker worker;
  Rig() {
    core.budget.reset(1 << 20);
    link.attach(worker.frames_ours.get(), worker.pipes_ours[0].get(), worker.pipes_ours[1].get());
  }
  std::string shown() const {
    std::string text;
    for (const auto& s : client.of("stream")) text += s.content["text"].get<std::string>();
    return text;
  }
};

}  // namespace

TEST_CASE("worker link: a frame sent reaches the worker's end of fd 3", "[worker_link]") {
  Rig rig;
  rig.link.send({{"type", "execute"}, {"id", "r1"}});
  std::string sent = rig.worker.read_frames_sent();
  CHECK(sent == encode_worker_frame({{"type", "execute"}, {"id", "r1"}}));
}

TEST_CASE("worker link: frames reach the core in order, the text before each shown first",
          "[worker_link]") {
  Rig rig;
  rig.worker.print(0, "before\n");
  rig.worker.write_frame({{"type", "display"}, {"id", "r1"}, {"written", {7u, 0u}}});
  rig.worker.print(0, "after\n");  // written after the frame: waits for the next turn
  rig.worker.write_frame({{"type", "done"}, {"id", "r1"}});
  rig.link.read_frames();
  REQUIRE(rig.core.frames.size() == 2);
  CHECK(rig.core.frames[0]["type"] == "display");
  auto streams = rig.client.of("stream");
  REQUIRE_FALSE(streams.empty());
  CHECK(streams[0].content["text"] == "before\n");
  CHECK(streams[0].parent == "cell-1");
  rig.link.drain_pipes();
  rig.link.flush_streams(true);
  CHECK(rig.shown() == "before\nafter\n");
  CHECK(rig.link.total_bytes(0) == 13);
  CHECK(rig.core.reads >= 1);
}

TEST_CASE("worker link: the pipes' text is redacted before it is published", "[worker_link]") {
  Rig rig;
  rig.worker.print(1, "key=sk-live-0123456789abcdef\n");
  rig.link.drain_pipes();
  rig.link.flush_streams(true);
  CHECK(rig.shown().find("sk-live") == std::string::npos);
  REQUIRE(rig.client.of("stream").size() == 1);
  CHECK(rig.client.of("stream")[0].content["name"] == "stderr");
}

TEST_CASE("worker link: an outbox left unread past its bound is the worker's fault",
          "[worker_link]") {
  Rig rig;
  json big = {{"type", "comm"}, {"data", std::string(1 << 20, 'x')}};
  for (int i = 0; i < 32 && rig.core.faults == 0; ++i) rig.link.send(big);
  CHECK(rig.core.faults == 1);
  CHECK_FALSE(rig.link.frames_open());
  REQUIRE(rig.audit.of("worker_fault").size() == 1);
  CHECK(rig.audit.of("worker_fault")[0]["fault"].get<std::string>().find("unread") !=
        std::string::npos);
  rig.worker.read_frames_sent();
  rig.link.send({{"type", "execute"}});  // closed: nothing more is sent
  CHECK(rig.core.faults == 1);
}

TEST_CASE("worker link: fd 3 closed while the worker runs on is a fault after the grace",
          "[worker_link]") {
  Rig rig;
  rig.worker.frames = Fd();  // the worker closes its end
  rig.link.read_frames();
  CHECK_FALSE(rig.link.frames_open());
  auto due = rig.link.next_deadline();
  REQUIRE(due);
  rig.link.on_timers(*due - std::chrono::milliseconds(1));
  CHECK(rig.core.faults == 0);
  rig.link.on_timers(*due);
  CHECK(rig.core.faults == 1);
  CHECK(rig.audit.of("worker_fault").size() == 1);
}

TEST_CASE("worker link: a frame that won't parse faults the worker", "[worker_link]") {
  Rig rig;
  std::string bad = std::string("\0\0\0\5{oops", 9);
  REQUIRE(::write(rig.worker.frames.get(), bad.data(), bad.size()) == 9);
  rig.link.read_frames();
  CHECK(rig.core.faults == 1);
  CHECK(rig.core.frames.empty());
}

TEST_CASE("worker link: a detached link reads and sends nothing", "[worker_link]") {
  Rig rig;
  rig.link.detach();
  rig.worker.print(0, "late\n");
  rig.link.drain_pipes();
  rig.link.flush_streams(true);
  CHECK(rig.client.sent.empty());
  CHECK(rig.link.frames_fd_to_poll() == -1);
  CHECK(rig.link.pipe_fd_to_poll(0) == -1);
  rig.link.send({{"type", "execute"}});
  CHECK(rig.worker.read_frames_sent().empty());
}
