#pragma once
// The debugger link (issue 31, docs/design/debugger.md §3): JupyterLab's debug_request arrives on
// control; the link hands it to the worker's debugger on its debug channel (fd 4, framed as fd 3:
// frame_reader.hpp) under an id of its own, and relays what comes back: the debug_reply on
// control, the debug events on IOPub while a debug session is started, the paused state to the
// cell's limits (through DebugCore). The worker is the attacker: what it sends is checked,
// redacted and charged like output, only ids the link issued are answered (the pending table,
// its deadlines, the started state and the event rate: debug_requests.hpp), and nothing here
// waits on the worker (a request the worker never answers is answered at its deadline). The
// rules, each a case of its unit test (tests/unit/kernel/session/debug_link.cpp):
//   - requests are served one at a time (busy, reply, idle), in the order they came; those that
//     come before the worker's hello wait for it, or for the reason there is none;
//   - a request the worker cannot take (malformed, a command outside the allowlist, no worker,
//     no debugpy, the channel closed, too many waiting) is refused by the link in DAP's shape;
//   - a request that runs code is audited as `debug_code` first, and refused under
//     --audit-required while the audit log fails;
//   - replies and events are redacted, a rich inspection's bundle checked as a display's, and
//     charged to the output budget with no exemption: a reply past it becomes a refusal, an
//     event past it is dropped, and an event the frontend's state hangs on (`stopped`, ...) that
//     is past it, or larger than kEssentialEventBytes, ends the debug session with a notice;
//   - a debug request the worker leaves unread past the outbox's bound is the worker's fault;
//   - the channel's EOF is no fault (a worker without a debugger closes it): what is pending is
//     answered after a grace, or by the worker's exit ("the session restarted").
// Doors: the client, the audit log, the worker (its fault), the output checks, the diagnostics
// log, the audit policy; the worker's debug fd (given at start, taken when it goes) and its
// readiness, told by the core; the running request's facts, asked through DebugCore.
#include <chrono>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernel/observability/audit_log.hpp"
#include "kernel/observability/diagnostics.hpp"
#include "kernel/output/output_stream.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "kernel/session/debug_requests.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/output_checks.hpp"
#include "kernel/session/worker_channel.hpp"
#include "kernel/session/worker_frames.hpp"

namespace belljar {

// What the debugger link asks the core about the running request at the moment it needs it (a
// frame handled mid-read, a queued request served once another is answered), and the one thing
// it tells it. The core implements it with a small adapter (kernel.hpp); the unit test, a fake.
class DebugCore {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~DebugCore() = default;
  // What the worker's output is charged to now: the running request's budget, else the budget
  // of output between requests.
  virtual OutputBudget& output_budget() = 0;
  // The request the worker's output goes under (null when none runs), and where output no
  // request answers goes (the last cell; null before any).
  virtual const WireMessage* output_parent() const = 0;
  virtual const WireMessage* background_parent() const = 0;
  // The executing cell's count, for the debug_code record; nullopt when no cell executes.
  virtual std::optional<int> execution_count() const = 0;
  // The worker's word on its main thread (debug_state): paused in the debugger, or running.
  virtual void note_pause(bool paused, Clock::time_point now) = 0;
  // The debug session ended: the running request's pause, if any, ends with it.
  virtual void end_pause(Clock::time_point now) = 0;
  // The pipes' text written before a frame is shown before it (worker_channel.hpp).
  virtual void read_output_before(const nlohmann::json& frame) = 0;
};

class DebugLink {
 public:
  using Clock = std::chrono::steady_clock;
  // The largest event the frontend's state hangs on that is relayed (JupyterLab's are a few
  // hundred bytes): a larger one ends the debug session, as one past the budget does.
  static constexpr size_t kEssentialEventBytes = 16u << 10;
  // After the debug channel's EOF, the worker's exit may follow (it answers with the reason).
  static constexpr auto kEofGrace = std::chrono::seconds(2);

  // --audit-required, --audit-code.
  struct AuditPolicy {
    bool required = false;
    bool code = false;
  };

  DebugLink(ClientDoor& client, AuditRecords& audit, WorkerDoor& worker, OutputChecks& checks,
            RateLimitedLog& log, AuditPolicy policy, DebugCore& core)
      : client_(client),
        audit_(audit),
        worker_(worker),
        checks_(checks),
        log_(log),
        policy_(policy),
        core_(core) {}

  // The worker's life, as the core tells it. A new worker is starting: nothing of the old one's
  // channel is kept, and it has no debugger until its hello says so.
  void new_worker();
  // Its debug channel (non-blocking), polled until EOF or a fault.
  void attach(int debug_fd);
  // The worker process is gone (its fd closed): nothing more is read from or written to it.
  void worker_gone();
  // The worker broke a bound (WorkerDoor::fault): its debug channel is read no more.
  void close();
  // Whether the worker said hello, else why none can be started ("" while one is starting): told
  // whenever the core's word on it changes.
  void readiness(bool ready, std::string start_error) {
    ready_ = ready;
    start_error_ = std::move(start_error);
  }
  // hello's `debugger`: whether the sandbox's Python can debug (debugpy found).
  void hello(bool debugger) { worker_debugger_ = debugger; }
  bool worker_debugger() const { return worker_debugger_; }
  // The requests held until the worker's hello (or the reason there is none), in the order they
  // came: the core serves them again now, each as it would a control message.
  std::vector<WireMessage> take_held() { return std::exchange(held_, {}); }

  // A client's debug_request (control).
  void serve(const WireMessage& message);
  // For the reactor: fd 4 while it is polled (else -1), and whether there is something to write.
  int poll_fd() const { return open_ ? fd_ : -1; }
  bool has_output() const { return !outbox_.empty(); }
  void flush();
  // A turn's worth of fd 4's frames, each handled as handle_frame does.
  void read();
  // One frame of the debug channel's (debug_reply, debug_event, debug_state).
  void handle_frame(const nlohmann::json& frame);
  // Requests past their deadline answered; after the channel's EOF grace, the session ended.
  void check_deadlines(Clock::time_point now);
  std::optional<Clock::time_point> next_deadline() const;
  // The worker is gone, or its debug channel: every pending request answered with `why`, the
  // debug session's state cleared; requests waiting their turn are served afresh.
  void end_session(const std::string& why);

  // The worker said its main thread is stopped (a cell started now starts paused).
  bool paused() const { return requests_.paused(); }
  // A debug session is started (the worker's debugger threads hold its state).
  bool session_started() const { return requests_.started(); }
  // The id the last request handed to the worker carries (the fuzzer's @DID).
  uint64_t last_id() const { return requests_.last_id(); }

 private:
  // The control reply (debug_reply, parented to the request), then idle; the next one waiting.
  void answer(const WireMessage& request, nlohmann::json content);
  // Why no debug request can be handed to the worker now; "" when one can.
  std::string unavailable() const;
  // An audit record for a request that runs code; false when it must be refused
  // (--audit-required and the audit log is failing), with `refusal` saying why.
  bool audit_code(const WireMessage& request, const std::string& code, std::string& refusal);
  void on_reply(const nlohmann::json& frame);
  void on_event(const nlohmann::json& frame);
  // A reply's or an event's content as the client may get it: redacted, a rich inspection's
  // bundle checked as a display's, charged to the output budget; nullopt past the budget.
  std::optional<nlohmann::json> checked_content(nlohmann::json content, bool rich_bundle);
  // An event the frontend's state hangs on could not be relayed (past the budget, or larger
  // than an event may be): the debug session ends, with a notice.
  void stopped_for_budget(const std::string& event, size_t bytes);

  ClientDoor& client_;
  AuditRecords& audit_;
  WorkerDoor& worker_;
  OutputChecks& checks_;
  RateLimitedLog& log_;
  const AuditPolicy policy_;
  DebugCore& core_;

  DebugRequests requests_;
  WorkerFrameDecoder decoder_;
  WorkerOutbox outbox_;
  int fd_ = -1;                              // the worker's debug channel; -1 once it is gone
  bool open_ = false;                        // fd 4 polled until EOF or a fault
  std::optional<Clock::time_point> eof_at_;  // EOF seen: pending answered then
  bool ready_ = false;                       // the worker said hello
  std::string start_error_;                  // why no worker could be started
  bool worker_debugger_ = false;             // hello said `debugger: true`
  std::vector<WireMessage> held_;            // arrived before hello
  std::deque<WireMessage> queued_;           // waiting for the one being answered
  // The last debug_request's header: the parent of the debug events (as ipykernel parents them).
  std::optional<WireMessage> last_request_;
};

}  // namespace belljar
