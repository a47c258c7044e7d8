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

// In WorkerFrame's order.
constexpr std::array<std::string_view, 22> kFrameNames = {
    "hello",          "display",       "update_display",    "result",          "clear_output",
    "stream",         "error",         "input_request",     "limits",          "audit_request",
    "comm_open",      "comm_msg",      "comm_close",        "comm_begin",      "done",
    "complete_reply", "inspect_reply", "is_complete_reply", "comm_info_reply", "debug_reply",
    "debug_event",    "debug_state",
};
static_assert(kFrameNames.size() == static_cast<size_t>(WorkerFrame::debug_state) + 1);

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
  for (size_t i = 0; i < kFrameNames.size(); ++i)
    if (kFrameNames[i] == type) return static_cast<WorkerFrame>(i);
  return std::nullopt;
}

std::string_view worker_frame_name(WorkerFrame frame) {
  return kFrameNames[static_cast<size_t>(frame)];
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
