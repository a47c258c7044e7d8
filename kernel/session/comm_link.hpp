#pragma once
// Comms (the protocol ipywidgets and other interactive libraries stand on) between the frontend
// and the worker. The supervisor routes and checks; the comms themselves live in the worker.
//
// A frontend's comm_open / comm_msg / comm_close is a shell request like execute, handed to the
// worker in order (request_frame), with the message's own limits, budget (start_handler) and
// busy/idle. One that arrives while a cell runs in the worker is handed at once instead, ahead of
// the requests queued behind the cell, as ipykernel 7 serves them while a cell awaits
// (comms_during_cell.hpp): its handler runs when the cell's loop turns, its output is parented to
// it and charged to the cell, it has no busy/idle of its own; if the cell ends first, it is
// served after it as an ordinary comm request, ahead of the requests queued behind the cell
// (take_back). comm_info_request is answered from the worker's live registry (info).
// The worker's comm messages, sent while it serves a request, are published on iopub parented to
// that request (publish). The threat is the worker: each of its comm messages is checked (ids,
// shapes, canonical base64 buffers), redacted, charged like any output (to the cell's budget, or
// to the budget comm handlers share per minute: worker_comms.hpp's CommBudgetWindow) and counted
// (kMessagesPerRequest), so a flood is refused, logged and told once, never passed on to the
// browser. What the page does with comm traffic (requirejs for modules, innerHTML and MathJax for
// widget text, CSS for layout) falls under --active-output: widget_models.hpp checks each message
// first (output_checks.hpp). A handler that took the session down is told on its stderr and again
// at the start of the next cell.
// Doors: the client, the worker (frames handed during a cell), the output checks, the
// diagnostics logs. Of the running request: the Cell whose counts it keeps, the budget it
// charges, and the kernel's counter of frame ids, passed to the call that needs them.
#include <chrono>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "kernel/session/cell.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/comms_during_cell.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/output_checks.hpp"
#include "kernel/session/output_publisher.hpp"
#include "kernel/session/worker_comms.hpp"
#include "kernel/session/worker_frames.hpp"

namespace belljar {

class CommLink {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr uint64_t kMessagesPerRequest = 10'000;

  // `frame_log`: what the worker can trigger; `request_log`: what a client can.
  CommLink(ClientDoor& client, WorkerDoor& worker, OutputChecks& checks, RateLimitedLog& frame_log,
           RateLimitedLog& request_log)
      : client_(client),
        worker_(worker),
        checks_(checks),
        frame_log_(frame_log),
        request_log_(request_log),
        publisher_(client, checks, frame_log) {}

  // The frame for a frontend's comm message, or null when it is not one (no comm_id, a comm_open
  // without a target). The widget models learn the comms the page opens and closes.
  nlohmann::json request_frame(const WireMessage& message, const std::string& id);
  // A comm request starts: the budget its handler runs on, shared per window; a cell refills it.
  OutputBudget start_handler(Clock::time_point now, uint64_t limit) {
    return window_.start_handler(now, limit);
  }
  void cell_started() { window_.cell_started(); }

  // A comm message the worker sent while `cell` runs (counted against it), charged to `budget`,
  // published parented to `parent` (the request, or a comm message handled during the cell).
  void publish(const std::string& type, const nlohmann::json& frame, const WireMessage* parent,
               Cell& cell, OutputBudget& budget);

  // The frontend's comm message while a cell runs in the worker (`cell_listens`: it executes, is
  // in the worker, the worker reads its frames, its frontend is not gathering what it sent):
  // taken, unless a comm message already waits in the queue (`queue_holds_comm`: it came first).
  bool takes_during_cell(const WireMessage& message, bool cell_listens, bool queue_holds_comm);
  // Taken: handed to the worker in turn, marked `during` the cell; `frame_ids` names each frame.
  void arrive(WireMessage message, const Cell& cell, uint64_t& frame_ids);
  // The worker's comm_begin for the handed message (`executing`: a cell runs).
  void on_begin(const nlohmann::json& frame, bool executing);
  // The handler of a message handed during the cell runs as frame `id`; running(): its message.
  bool handler_runs(std::string_view id) const { return during_cell_.runs(id); }
  const WireMessage* running() const { return during_cell_.running(); }
  // A frame of that handler: its output, parented to its message and charged to the cell's budget
  // and comm count; its `done` ends it and the next may go.
  void on_handler_frame(WorkerFrame type, const nlohmann::json& frame, Cell& cell,
                        OutputBudget& budget, uint64_t& frame_ids);
  // Handlers that ran to their end during this cell, counted afresh for the next.
  uint64_t take_handled() { return during_cell_.take_handled(); }
  // The cell is over, or the worker went: the messages to serve as ordinary comm requests, in
  // order, ahead of the requests queued behind the cell.
  std::deque<WireMessage> take_back();

  // A comm request's handler ended, having run as `handler` on `budget`: what it had withheld or
  // passed told, what it spent spent for the window.
  void handler_finished(const Cell& handler, const OutputBudget& budget);
  // Said once per cell, or once per comm budget window for a comm request.
  void tell_drops(const Cell& cell);
  // A comm handler (`handler`) took the session down with it: said on its stderr, which a page
  // shows nowhere, and again by tell_session_lost at the start of the next cell.
  void tell_session_lost_by_handler(const std::string& why, const WireMessage& handler);
  void tell_session_lost(const WireMessage& cell_request);

  // comm_info_reply's content: what the worker says is open, each entry checked, within the cap;
  // unless --active-output allow, only comms the page was told of, by the target it was told.
  nlohmann::json info(const nlohmann::json& frame);

 private:
  void hand_during_cell(const Cell& cell, uint64_t& frame_ids);

  ClientDoor& client_;
  WorkerDoor& worker_;
  OutputChecks& checks_;
  RateLimitedLog& frame_log_;
  RateLimitedLog& request_log_;
  OutputPublisher publisher_;
  // The output budget comm handlers share, a window at a time.
  CommBudgetWindow window_;
  // The frontend's comm messages while a cell runs in the worker: handed at once, one at a time.
  CommsDuringCell during_cell_;
  std::string session_lost_notice_;  // for the next cell, once
};

}  // namespace belljar
