#include "kernel/session/request_kind.hpp"

#include <array>

namespace belljar {

namespace {
struct Spelling {
  RequestKind kind;
  std::string_view request, frame, answer;
};
constexpr std::array<Spelling, 6> kSpellings = {{
    {RequestKind::execute, "execute_request", "execute", "done"},
    {RequestKind::complete, "complete_request", "complete", "complete_reply"},
    {RequestKind::inspect, "inspect_request", "inspect", "inspect_reply"},
    {RequestKind::is_complete, "is_complete_request", "is_complete", "is_complete_reply"},
    {RequestKind::comm, "comm_msg", "comm", "done"},
    {RequestKind::comm_info, "comm_info_request", "comm_info", "comm_info_reply"},
}};

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
std::string_view worker_answer(RequestKind kind) {
  return spelling(kind).answer;
}

std::optional<RequestKind> request_kind(std::string_view msg_type) {
  if (msg_type == "comm_open" || msg_type == "comm_close") return RequestKind::comm;
  for (const auto& s : kSpellings)
    if (s.request == msg_type) return s.kind;
  return std::nullopt;
}

}  // namespace belljar
