#include "kernel/session/worker_link.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "kernel/protocol/replies.hpp"
#include "kernel/session/frame_reader.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

namespace {
const char* kStreamNames[] = {"stdout", "stderr"};
}  // namespace

WorkerLink::WorkerLink(ClientDoor& client, AuditRecords& audit, RateLimitedLog& log,
                       const Redactor& redactor, Core& core)
    : client_(client), audit_(audit), log_(log), redactor_(redactor), core_(core) {
  for (auto& stream : streams_) stream.set_hold_back(redactor_.hold_back());
}

void WorkerLink::attach(int frames_fd, int stdout_fd, int stderr_fd) {
  attached_ = true;
  frames_fd_ = frames_fd;
  pipe_fds_[0] = stdout_fd;
  pipe_fds_[1] = stderr_fd;
  for (int fd : {frames_fd, stdout_fd, stderr_fd})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  decoder_ = WorkerFrameDecoder();
  outbox_.clear();
  frames_open_ = true;
  frames_eof_at_.reset();
  pipe_open_[0] = pipe_open_[1] = true;
  cursors_.reset();
}

void WorkerLink::detach() {
  attached_ = false;
  frames_fd_ = pipe_fds_[0] = pipe_fds_[1] = -1;
}

int WorkerLink::pipe_fd_to_poll(int index) const {
  return attached_ && pipe_open_[index] ? pipe_fds_[index] : -1;
}

void WorkerLink::send(const nlohmann::json& frame) {
  if (!frames_open()) return;
  if (!outbox_.queue(frame))
    return fault("it left " + format_size(outbox_.size()) + " of frames unread");
  flush_outbox();
}

void WorkerLink::fault(const std::string& why) {
  // Past a bound the worker is at fault: it goes (its exit restarts the session), and nothing
  // more is read from or sent to it in the meantime.
  log_.log("worker fault", why + "; restarting the worker");
  audit_.record("worker_fault", {{"fault", why}});
  frames_open_ = false;
  frames_eof_at_.reset();
  outbox_.clear();
  core_.faulted();
}

void WorkerLink::flush_outbox() {
  // A worker that is gone drops the queue: its exit reports it.
  if (frames_open()) outbox_.flush(frames_fd_);
}

void WorkerLink::read_frames() {
  if (!frames_open()) return;
  // fd 3's frames to the core, the pipes' text before each (frame_reader.hpp).
  class Sink final : public FrameSink {
   public:
    explicit Sink(WorkerLink& link) : link_(link) {}
    bool worker_present() const override { return link_.attached_; }
    void read_output_before(const nlohmann::json& frame) override {
      link_.read_output_before(frame);
    }
    void handle(const nlohmann::json& frame) override { link_.core_.handle(frame); }
    void fault(const std::string& why) override { link_.fault(why); }

   private:
    WorkerLink& link_;
  } sink(*this);
  if (!belljar::read_frames(frames_fd_, decoder_, frames_open_, sink)) {
    // EOF, handled once: a half-closed socket stays readable forever, so it is no longer
    // polled. A worker that is ending exits now (its exit says why); one that closed its
    // end and kept running is at fault once the grace period is over.
    frames_open_ = false;
    frames_eof_at_ = Clock::now() + kFramesEofGrace;
  }
}

void WorkerLink::read_pipe(int index, size_t budget) {
  if (!attached_ || !pipe_open_[index]) return;
  char chunk[65536];
  size_t total = 0;
  while (total < budget) {
    // Never past the budget: before a frame, what lies beyond its cursor may follow it.
    ssize_t n = ::read(pipe_fds_[index], chunk, std::min(sizeof chunk, budget - total));
    if (n > 0) {
      total += static_cast<size_t>(n);
      cursors_.read(index, static_cast<uint64_t>(n));
      streams_[index].append(std::string_view(chunk, static_cast<size_t>(n)),
                             core_.output_budget());
      if (streams_[index].due(Clock::now())) flush_streams(false);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) pipe_open_[index] = false;
    break;
  }
  if (total > 0) core_.text_read();
}

void WorkerLink::drain_pipes() {
  read_pipe(0, kDrainBudget);
  read_pipe(1, kDrainBudget);
}

void WorkerLink::read_output_before(const nlohmann::json& frame) {
  // That much is read and shown before the frame, and no more, so text printed just after it
  // (the next line of a clear_output loop) waits for the next turn; text read before the frame,
  // bytes written around the streams included, is always shown before it (worker_channel.hpp).
  auto due = cursors_.due_before(frame, kDrainBudget);
  for (int i = 0; i < 2; ++i)
    if (due[i] > 0) read_pipe(i, static_cast<size_t>(due[i]));
  flush_streams(true);
}

void WorkerLink::flush_streams(bool final) {
  const WireMessage* parent = core_.background_parent();
  for (int i = 0; i < 2; ++i) {
    if (!streams_[i].pending()) continue;
    auto now = Clock::now();
    size_t cut =
        redactor_.cut_after_secrets(streams_[i].pending_text(), streams_[i].ready(final, now));
    std::string text = redactor_.redact(streams_[i].take_prefix(cut, now));
    if (!text.empty()) client_.publish("stream", create_stream(kStreamNames[i], text), parent);
  }
}

void WorkerLink::reset_totals() {
  for (auto& stream : streams_) stream.reset_totals();
}

std::optional<WorkerLink::Clock::time_point> WorkerLink::next_deadline() const {
  std::optional<Clock::time_point> next = frames_eof_at_;
  for (auto& stream : streams_)
    if (stream.pending() && (!next || stream.deadline() < *next)) next = stream.deadline();
  return next;
}

void WorkerLink::on_timers(Clock::time_point now) {
  for (auto& stream : streams_)
    if (stream.due(now)) {
      flush_streams(false);
      break;
    }
  if (frames_eof_at_ && now >= *frames_eof_at_) {
    frames_eof_at_.reset();
    if (attached_) fault("it closed its frame socket and kept running");
  }
}

}  // namespace belljar
