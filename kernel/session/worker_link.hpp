#pragma once
// The worker link: the supervisor's end of the worker's channel. Its frames on fd 3, sent through
// a bounded outbox and read a turn at a time (frame_reader.hpp), and its text on fd 1 and 2, read
// from the pipes, placed before the frames that follow it (OutputCursors: worker_channel.hpp),
// coalesced (StreamBuffer), redacted and published under the parent the core names. The worker
// is the attacker: a frame socket closed while the worker runs on is its fault after a grace
// period, an outbox it leaves unread past its bound is its fault, and a fault closes the channel
// at once (nothing more is read or sent) before the core ends the sandbox. What a frame means
// is the core's (kernel.hpp's handle_frame); where text goes and what it is charged to, too.
// Doors: the client (the pipes' text), the audit log and the diagnostics log (faults), the
// redactor; the descriptors, the worker process's, given at attach.
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kernel/observability/audit_log.hpp"
#include "kernel/observability/diagnostics.hpp"
#include "kernel/output/output_stream.hpp"
#include "kernel/output/redactor.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/worker_channel.hpp"
#include "kernel/session/worker_frames.hpp"

namespace belljar {

class WorkerLink final : public WorkerDoor {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kDrainBudget = 16u << 20;  // pipe bytes read in one go before a frame
  static constexpr auto kFramesEofGrace = std::chrono::seconds(2);

  // What the link asks of the core.
  class Core {
   public:
    virtual ~Core() = default;
    // The budget the pipes' text is charged to now (the running request's, or output between
    // requests'), and the parent it is published under: what the debugger link asks as well.
    virtual OutputBudget& output_budget() = 0;
    virtual const WireMessage* background_parent() const = 0;
    // Text was read from the pipes (between requests, the core tells what it withheld).
    virtual void text_read() = 0;
    // One frame of fd 3's, in order, the text before it already shown.
    virtual void handle(const nlohmann::json& frame) = 0;
    // The channel was closed for a fault: the core ends the sandbox (its exit restarts it).
    virtual void faulted() = 0;
  };

  WorkerLink(ClientDoor& client, AuditRecords& audit, RateLimitedLog& log, const Redactor& redactor,
             Core& core);

  // A new worker's descriptors: fd 3's socket and the read ends of its fd 1 and 2 (made
  // non-blocking here). The channel opens afresh: nothing queued, nothing read.
  void attach(int frames_fd, int stdout_fd, int stderr_fd);
  // The worker is gone: nothing more is read or sent.
  void detach();
  bool attached() const { return attached_; }
  bool frames_open() const { return attached_ && frames_open_; }

  // The reactor's poll: -1 for a descriptor not to poll.
  int frames_fd_to_poll() const { return frames_open() ? frames_fd_ : -1; }
  bool wants_to_write() const { return !outbox_.empty(); }
  int pipe_fd_to_poll(int index) const;

  void send(const nlohmann::json& frame) override;
  void fault(const std::string& why) override;
  void flush_outbox();
  // A turn's worth of fd 3: each frame to the core, the pipes' text before it.
  void read_frames();

  // Up to `budget` bytes of pipe `index` (0: fd 1, 1: fd 2), charged and coalesced.
  void read_pipe(int index, size_t budget);
  // Both pipes to their end (within kDrainBudget): a request is over, or the worker.
  void drain_pipes();
  // What the pipes held before `frame` was written is read and shown, and no more.
  void read_output_before(const nlohmann::json& frame);
  // At `done` the pipes were read to their end: text written around the streams is learnt.
  void learn_at_done(const nlohmann::json& done) { cursors_.learn_at_done(done); }
  // The coalesced text published (all of it when `final`, else what is due).
  void flush_streams(bool final);

  // A request starts: its text totals from zero.
  void reset_totals();
  uint64_t total_bytes(int index) const { return streams_[index].total_bytes(); }

  // The link's timers: text due to be published, the frame socket's grace after EOF.
  std::optional<Clock::time_point> next_deadline() const;
  void on_timers(Clock::time_point now);

 private:
  ClientDoor& client_;
  AuditRecords& audit_;
  RateLimitedLog& log_;
  const Redactor& redactor_;
  Core& core_;
  bool attached_ = false;
  int frames_fd_ = -1, pipe_fds_[2] = {-1, -1};
  WorkerFrameDecoder decoder_;
  WorkerOutbox outbox_;
  bool frames_open_ = false;                        // polled until EOF or a fault
  std::optional<Clock::time_point> frames_eof_at_;  // EOF seen: at fault if still running then
  bool pipe_open_[2] = {false, false};
  OutputCursors cursors_;    // where its frames fall in the text of fd 1/2
  StreamBuffer streams_[2];  // stdout, stderr
};

}  // namespace belljar
