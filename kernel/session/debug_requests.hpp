#pragma once
// The debugger's requests as the supervisor tracks them (issue 31, docs/design/debugger.md §3):
// a part of the debug channel's routing (debug_link.hpp) with one job, tested alone
// (tests/unit/kernel/session/debug_requests.cpp).
//
// JupyterLab's debug_request arrives on control; the supervisor hands it to the worker's
// debugger on fd 4 under an id of its own and answers the client when the worker's debug_reply
// for that id comes, or when its deadline passes. The worker is the attacker: it may answer an
// id it was never given, answer twice or never, send a reply of the wrong shape or flood
// events. So only the supervisor's own pending ids are answered, each once; a reply must be a
// DAP response to that very request, else it becomes a refusal; the number waiting is bounded;
// every request has a deadline; events are relayed only while a debug session is started, and
// at a bounded rate (past it, only the events the frontend's state hangs on, which are charged
// to the output budget like every other: debug_link.hpp).
//
// PausedTime: a cell's --timeout counts running time only, not the time the worker says its main
// thread is stopped at a breakpoint, up to the pause allowance (--debug-pause): past it, paused
// time counts again and the ordinary timeout ends the cell (design §4). The pause is the
// worker's word, so it is weighed against what the supervisor measures: a paused thread uses no
// CPU, and a session that burns CPU while it says it is paused was not paused: its pauses are
// forfeited (nothing credited, later ones ignored for the cell). CPU itself always counts.
#include <chrono>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/protocol/wire_message.hpp"

namespace belljar {

// The DAP commands a client may send (JupyterLab's, and DAP's usual ones that run nothing the
// cell could not); anything else is refused before it reaches the worker.
bool debug_command_allowed(std::string_view command);
// A refusal in DAP's shape, for `content` (the client's debug_request content, whatever its
// shape): {type:"response", request_seq, success:false, command, message}.
nlohmann::json debug_refusal(const nlohmann::json& content, const std::string& message);
// Why a client's debug_request content cannot be handed on (not an object, no command, a
// command outside the allowlist); nullopt when it can.
std::optional<std::string> debug_request_problem(const nlohmann::json& content);
// The code a request runs in the session, for the audit log: evaluate's expression,
// setExpression's and setVariable's assignment, copyToGlobals', a breakpoint's condition,
// hit condition or log message; nullopt for a request that runs none.
std::optional<std::string> code_in_debug_request(const nlohmann::json& content);

// The DAP events the frontend's state hangs on: never dropped for the rate.
bool essential_debug_event(std::string_view event);

class DebugRequests {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxPending = 32;
  static constexpr std::chrono::seconds kDeadline{30};
  static constexpr std::chrono::seconds kStartDeadline{60};  // initialize, attach: debugpy loads
  static constexpr std::chrono::seconds kEventWindow{60};
  static constexpr uint64_t kEventsPerWindow = 1000;

  struct Pending {
    uint64_t id = 0;
    WireMessage request;
    std::string command;
    nlohmann::json request_seq;  // as the client sent it (a number, normally)
    Clock::time_point deadline;
  };

  bool full() const { return pending_.size() >= kMaxPending; }
  uint64_t last_id() const { return next_id_; }  // the id add() gave last; 0 before any
  size_t pending() const { return pending_.size(); }
  // Records a request (its content checked by debug_request_problem) and returns the id its
  // frame carries: fresh, never reused within the kernel's life.
  uint64_t add(WireMessage request, Clock::time_point now);
  // The request a debug_reply answers, taken out of the table; nullopt for an id that is not
  // pending (never issued, answered already, expired).
  std::optional<Pending> take(uint64_t id);
  // Requests whose deadline passed by `now`, taken out of the table, oldest first.
  std::vector<Pending> take_expired(Clock::time_point now);
  // Every pending request (the worker exited or restarted), and the session's state cleared.
  std::vector<Pending> take_all();
  std::optional<Clock::time_point> next_deadline() const;

  // `reply` (the worker's debug_reply content) as the client may get it, for `request`: a DAP
  // response to that request, else a refusal saying the debugger answered malformed.
  nlohmann::json check_reply(const Pending& request, nlohmann::json reply) const;
  // `reply` went to the client for `request`: a successful initialize starts the debug
  // session; disconnect's reply ends it.
  void note_answer(const Pending& request, const nlohmann::json& reply);
  bool started() const { return started_; }
  // The worker's debug_state: the session's main thread is stopped (true) or runs (false).
  bool paused() const { return paused_; }
  void set_paused(bool paused) { paused_ = paused && started_; }
  // The supervisor ends the session (an essential event past the output budget): its events
  // are dropped and its pauses ignored until the client starts a session again (initialize).
  void end_session() { started_ = paused_ = false; }

  // One event more at `now` (its DAP `event` name): false when it is to be dropped (no session
  // started, or past the rate and not essential).
  bool admit_event(std::string_view event, Clock::time_point now);
  uint64_t events_dropped() const { return events_dropped_; }

 private:
  std::deque<Pending> pending_;  // in order of their deadlines' start
  uint64_t next_id_ = 0;
  bool started_ = false, paused_ = false;
  std::optional<Clock::time_point> window_start_;
  uint64_t events_in_window_ = 0, events_dropped_ = 0;
};

// A cell's paused time (debug_state), all in seconds since the cell started.
class PausedTime {
 public:
  using Clock = std::chrono::steady_clock;
  // What a claimed pause may use of the session's CPU (all its processes) and still be believed:
  // a fixed grace (the debugger answering the client's stackTrace, variables, evaluate; the
  // sampling's slack) and a share of the time paused. A busy loop passes it within a second.
  static constexpr double kCpuGraceSeconds = 0.5;
  static constexpr double kCpuShareOfPause = 0.05;

  void pause(Clock::time_point now) {
    if (!since_ && !forfeited_) since_ = now;
  }
  // The pause ends (continue, the cell's done, an interrupt, the worker's exit).
  void resume(Clock::time_point now);
  bool paused() const { return since_.has_value(); }
  // Paused so far, whole.
  double total(Clock::time_point now) const;
  // What the timeout does not count: the paused time, at most `allowance`.
  double credited(Clock::time_point now, double allowance) const;
  // When a cell started at `started` reaches `timeout` seconds of counted time, if nothing
  // changes: a pause under the allowance moves it by the allowance that is left.
  Clock::time_point deadline(Clock::time_point started, double timeout, double allowance,
                             Clock::time_point now) const;

  // The session's CPU so far (a reading of the supervisor's, never the worker's word): what it
  // used since the previous reading is charged to the pause when one was claimed meanwhile.
  // Taken before each pause or resume and at every turn of the reactor.
  void sample_cpu(double cpu);
  // CPU used while paused past kCpuGraceSeconds + kCpuShareOfPause of the paused time: the
  // pauses are forfeited (credited() is 0 from now on, pause() ignored) and true is returned,
  // once.
  bool forfeit_if_busy(Clock::time_point now);
  bool forfeited() const { return forfeited_; }
  double cpu_while_paused() const { return cpu_while_paused_; }

 private:
  std::optional<Clock::time_point> since_;
  double total_ = 0;
  std::optional<double> last_cpu_;
  double cpu_while_paused_ = 0;
  bool forfeited_ = false;
};

}  // namespace belljar
