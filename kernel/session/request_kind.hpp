#pragma once
// The shell requests the worker answers, and every frame the worker sends, as values: the
// Jupyter message that asked, the frame the worker is sent and the frame it answers with are
// all spelled here, once, so a frame is parsed into its type in one place and handled by an
// exhaustive switch (Kernel::handle_frame), never by comparing its text again.
#include <cstddef>
#include <optional>
#include <string_view>

namespace belljar {

// comm: comm_open, comm_msg and comm_close from the frontend, handed to the worker's comms in
// order with the other shell requests; while a cell runs in the worker, ahead of the requests
// queued behind it (comms_during_cell.hpp, as ipykernel 7); answered by `done`, no reply.
// comm_info: comm_info_request, answered from the worker's live registry.
enum class RequestKind { execute, complete, inspect, is_complete, comm, comm_info };

// Every frame the worker sends (worker/PROTOCOL.md).
enum class WorkerFrame {
  hello,  // first, once: language_info
  // output of the request being served
  display,
  update_display,
  result,
  clear_output,
  stream,  // text for an earlier request the worker names (`parent`), not the pipes' text
  error,
  // the worker asks, and waits for the answer frame
  input_request,
  limits,
  audit_request,
  checkpoint_request,  // a checkpoint magic's cell (checkpoints.hpp)
  // a comm's end in the worker opened, sent on or closed
  comm_open,
  comm_msg,
  comm_close,
  // the handler of a comm message handed during a cell starts (comms_during_cell.hpp)
  comm_begin,
  // the request's end: `done` for execute and comm, the reply for the others
  done,
  complete_reply,
  inspect_reply,
  is_complete_reply,
  comm_info_reply,
  // the debug channel's (fd 4; debug_link.hpp), never fd 3's
  debug_reply,  // the answer to a debug_request frame, naming its id
  debug_event,  // a DAP event of the started debug session
  debug_state,  // the session's main thread is paused at a breakpoint, or runs again
};
// What of a worker frame reaches a client, and the budget that charges it (docs/security.md,
// "Supervisor budgets"): one row per frame type, in the table that spells them, so a new frame
// is charged the day it is named. Nothing is exempt: past its budget a frame's content is cut
// or withheld with a notice; an essential debug event past it ends the debug session.
enum class FrameCharge {
  // Nothing of it reaches a client: the supervisor acts on it or answers the worker.
  nothing,
  // The supervisor's own content of a fixed shape and size (hello: language_info, rebuilt).
  fixed,
  // The output budget (--output-limit) of the request it belongs to, or of output between
  // requests (idle_output.hpp) when none runs: displays, streams, errors, comms, the prompt,
  // user_expressions and payloads, debug replies and events.
  output_budget,
  // A budget of --output-limit of its own, one reply's (complete, inspect, is_complete,
  // comm_info: a lookup is not a cell's output).
  reply_budget,
};
FrameCharge frame_charge(WorkerFrame frame);
inline constexpr size_t kWorkerFrameTypes = static_cast<size_t>(WorkerFrame::debug_state) + 1;

// Output the worker may send while it serves no request (a frame with `idle` in place of an
// id: an asyncio task's, a thread's or a timer's display, clear_output or comm message between
// cells). Every other frame belongs to a request, and sent so is dropped.
bool idle_output(WorkerFrame frame);
// Output a task or a thread may send for an earlier request, naming it (`parent`): displays,
// their updates and clears, and text (request_parents.hpp).
bool names_a_parent(WorkerFrame frame);
// A frame the debug channel (fd 4) carries; every other one is fd 3's.
bool debug_channel_frame(WorkerFrame frame);
// The frame the supervisor sends on the debug channel, named as the Jupyter request it carries.
inline constexpr std::string_view kDebugRequestFrame = "debug_request";
// The frame type a worker's "type" names; nullopt for one no worker sends.
std::optional<WorkerFrame> worker_frame(std::string_view type);
std::string_view worker_frame_name(WorkerFrame frame);

// "execute_request", "complete_request", ... (the Jupyter message type; "comm_msg" for comm)
std::string_view request_type(RequestKind kind);
// The request behind a Jupyter message type; nullopt for those the supervisor answers itself.
std::optional<RequestKind> request_kind(std::string_view msg_type);
// The frame sent to the worker: "execute", "complete", "inspect", "is_complete".
std::string_view worker_request(RequestKind kind);
// The worker's answer: done for execute and comm, else complete_reply, ...
WorkerFrame worker_answer(RequestKind kind);

}  // namespace belljar
