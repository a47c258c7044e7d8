#include "kernel/session/request_kind.hpp"

#include <array>

namespace belljar {

namespace {
struct Spelling {
  RequestKind kind;
  std::string_view request, frame;
  WorkerFrame answer;
};
constexpr std::array<Spelling, 6> kSpellings = {{
    {RequestKind::execute, "execute_request", "execute", WorkerFrame::done},
    {RequestKind::complete, "complete_request", "complete", WorkerFrame::complete_reply},
    {RequestKind::inspect, "inspect_request", "inspect", WorkerFrame::inspect_reply},
    {RequestKind::is_complete, "is_complete_request", "is_complete",
     WorkerFrame::is_complete_reply},
    {RequestKind::comm, "comm_msg", "comm", WorkerFrame::done},
    {RequestKind::comm_info, "comm_info_request", "comm_info", WorkerFrame::comm_info_reply},
}};

// In WorkerFrame's order: each frame's name, and what of it reaches a client, charged to which
// budget (FrameCharge).
struct FrameRow {
  std::string_view name;
  FrameCharge charge;
};
constexpr std::array<FrameRow, kWorkerFrameTypes> kFrames = {{
    {"hello", FrameCharge::fixed},  // language_info: rebuilt, only a checked version kept
    {"display", FrameCharge::output_budget},
    {"update_display", FrameCharge::output_budget},
    {"result", FrameCharge::output_budget},
    {"clear_output", FrameCharge::output_budget},
    {"stream", FrameCharge::output_budget},
    {"error", FrameCharge::output_budget},          // traceback cut to what is left
    {"input_request", FrameCharge::output_budget},  // the prompt, and a fixed cost each
    {"limits", FrameCharge::nothing},               // answered to the worker
    {"audit_request", FrameCharge::nothing},        // answered to the worker
    {"checkpoint_request", FrameCharge::nothing},   // answered to the worker
    {"comm_open", FrameCharge::output_budget},      // and the comm window (worker_comms.hpp)
    {"comm_msg", FrameCharge::output_budget},
    {"comm_close", FrameCharge::output_budget},
    {"comm_begin", FrameCharge::nothing},              // marks a handler's start
    {"done", FrameCharge::output_budget},              // user_expressions, payloads
    {"complete_reply", FrameCharge::reply_budget},     // cut to the cap
    {"inspect_reply", FrameCharge::reply_budget},      // cut to the cap
    {"is_complete_reply", FrameCharge::reply_budget},  // cut to the cap
    {"comm_info_reply", FrameCharge::reply_budget},    // emptied past the cap
    {"debug_reply", FrameCharge::output_budget},       // refused whole past it
    {"debug_event", FrameCharge::output_budget},       // dropped past it; essential: session ends
    {"debug_state", FrameCharge::nothing},             // the cell's limits only (cell_limits.cpp)
}};
// A row left out would be value-initialised (no name, charged nothing): refused at build time.
constexpr bool every_frame_has_its_row() {
  for (const FrameRow& row : kFrames)
    if (row.name.empty()) return false;
  return true;
}
static_assert(every_frame_has_its_row(), "a WorkerFrame without its row in kFrames");

const Spelling& spelling(RequestKind kind) {
  return kSpellings[static_cast<size_t>(kind)];
}
}  // namespace

std::string_view request_type(RequestKind kind) {
  return spelling(kind).request;
}
std::string_view worker_request(RequestKind kind) {
  return spelling(kind).frame;
}
WorkerFrame worker_answer(RequestKind kind) {
  return spelling(kind).answer;
}

std::optional<WorkerFrame> worker_frame(std::string_view type) {
  for (size_t i = 0; i < kFrames.size(); ++i)
    if (kFrames[i].name == type) return static_cast<WorkerFrame>(i);
  return std::nullopt;
}

std::string_view worker_frame_name(WorkerFrame frame) {
  return kFrames[static_cast<size_t>(frame)].name;
}

FrameCharge frame_charge(WorkerFrame frame) {
  return kFrames[static_cast<size_t>(frame)].charge;
}

bool idle_output(WorkerFrame frame) {
  switch (frame) {
    case WorkerFrame::display:
    case WorkerFrame::update_display:
    case WorkerFrame::clear_output:
    case WorkerFrame::stream:
    case WorkerFrame::comm_open:
    case WorkerFrame::comm_msg:
    case WorkerFrame::comm_close:
      return true;
    case WorkerFrame::hello:
    case WorkerFrame::result:
    case WorkerFrame::error:
    case WorkerFrame::input_request:
    case WorkerFrame::limits:
    case WorkerFrame::audit_request:
    case WorkerFrame::checkpoint_request:
    case WorkerFrame::comm_begin:
    case WorkerFrame::done:
    case WorkerFrame::complete_reply:
    case WorkerFrame::inspect_reply:
    case WorkerFrame::is_complete_reply:
    case WorkerFrame::comm_info_reply:
    case WorkerFrame::debug_reply:
    case WorkerFrame::debug_event:
    case WorkerFrame::debug_state:
      return false;
  }
  return false;
}

bool debug_channel_frame(WorkerFrame frame) {
  return frame == WorkerFrame::debug_reply || frame == WorkerFrame::debug_event ||
         frame == WorkerFrame::debug_state;
}

bool names_a_parent(WorkerFrame frame) {
  return frame == WorkerFrame::display || frame == WorkerFrame::update_display ||
         frame == WorkerFrame::clear_output || frame == WorkerFrame::stream;
}

std::optional<RequestKind> request_kind(std::string_view msg_type) {
  if (msg_type == "comm_open" || msg_type == "comm_close") return RequestKind::comm;
  for (const auto& s : kSpellings)
    if (s.request == msg_type) return s.kind;
  return std::nullopt;
}

}  // namespace belljar
