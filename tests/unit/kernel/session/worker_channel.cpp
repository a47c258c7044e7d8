// The worker's channel alone: frames queued and written as a real socket takes them, a worker
// that stops reading is found out past the bound; the text before each frame is what its
// cursor says, corrected by what was written around the worker's streams.
#include "kernel/session/worker_channel.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "kernel/session/worker_frames.hpp"
#include "sandbox/os/fd.hpp"

using namespace belljar;
using json = nlohmann::json;

namespace {
struct Pair {
  Fd ours, worker;
  Pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
    ours.reset(fds[0]);
    worker.reset(fds[1]);
  }
  std::string drain() {
    std::string got;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(worker.get(), buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    return got;
  }
};
}  // namespace

TEST_CASE("frames reach the worker whole and in order, as its socket takes them",
          "[worker_channel]") {
  Pair pair;
  WorkerOutbox outbox;
  REQUIRE(outbox.queue({{"type", "execute"}, {"id", "1"}}));
  REQUIRE(outbox.queue({{"type", "input_reply"}, {"value", "x"}}));
  CHECK(outbox.flush(pair.ours.get()));
  CHECK(outbox.empty());
  WorkerFrameDecoder decoder;
  decoder.feed(pair.drain());
  auto first = decoder.next(), second = decoder.next();
  REQUIRE(first);
  REQUIRE(second);
  CHECK((*first)["id"] == "1");
  CHECK((*second)["value"] == "x");
}

TEST_CASE("a worker that stops reading is a fault past the bound, not a growing queue",
          "[worker_channel]") {
  Pair pair;
  WorkerOutbox outbox;
  json big = {{"type", "execute"}, {"code", std::string(1 << 20, 'x')}};
  int queued = 0;
  while (outbox.queue(big)) {
    CHECK(outbox.flush(pair.ours.get()));  // the socket fills; the rest waits, no error
    REQUIRE(++queued < 100);
  }
  CHECK(outbox.size() > WorkerOutbox::kMaxBytes);
  CHECK(queued > 8);  // what the socket itself held, and the bound's worth queued
  // Once the worker reads again, what waited goes.
  size_t before = outbox.size();
  pair.drain();
  outbox.flush(pair.ours.get());
  CHECK(outbox.size() < before);
}

TEST_CASE("a worker that is gone drops what waited for it", "[worker_channel]") {
  ::signal(SIGPIPE, SIG_IGN);  // as the kernel does
  Pair pair;
  WorkerOutbox outbox;
  pair.worker.reset();
  REQUIRE(outbox.queue({{"type", "execute"}}));
  CHECK_FALSE(outbox.flush(pair.ours.get()));
  CHECK(outbox.empty());
}

TEST_CASE("the text shown before a frame is what its cursor says, and no more",
          "[worker_channel]") {
  OutputCursors cursors;
  cursors.read(0, 10);
  // stdout had written 25 bytes when the frame was sent: 15 more are due first
  // (a frame's counts arrive as JSON's unsigned numbers, as the worker writes them)
  CHECK(cursors.due_before({{"written", {25u, 0u}}}, 1 << 20) == std::array<uint64_t, 2>{15, 0});
  CHECK(cursors.due_before({{"written", {25u, 7u}}}, 4) == std::array<uint64_t, 2>{4, 4});
  CHECK(cursors.due_before({{"written", {5u, 0u}}}, 1 << 20) == std::array<uint64_t, 2>{0, 0});
  // a cursor that is missing or not two counts says nothing
  for (json bad : {json::object(), json{{"written", {1}}}, json{{"written", {-1, 2u}}},
                   json{{"written", {"1", 2}}}, json{{"written", 3}}})
    CHECK(cursors.due_before(bad, 1 << 20) == std::array<uint64_t, 2>{0, 0});
}

TEST_CASE("bytes written around the worker's streams move later cursors", "[worker_channel]") {
  OutputCursors cursors;
  // the cell's subprocess wrote 100 bytes the worker did not count; at done all 130 were read
  cursors.read(0, 130);
  cursors.learn_at_done({{"written", {30u, 0u}}});
  // the next frame says 40: 40 + 100 uncounted are due, 130 read, 10 more first
  CHECK(cursors.due_before({{"written", {40u, 0u}}}, 1 << 20) == std::array<uint64_t, 2>{10, 0});
  cursors.learn_at_done({{"written", {"x", 0}}});  // a malformed done teaches nothing
  CHECK(cursors.due_before({{"written", {40u, 0u}}}, 1 << 20) == std::array<uint64_t, 2>{10, 0});
  cursors.reset();
  CHECK(cursors.read_so_far(0) == 0);
  CHECK(cursors.due_before({{"written", {40u, 0u}}}, 1 << 20) == std::array<uint64_t, 2>{40, 0});
}
