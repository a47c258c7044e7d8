#pragma once
// The shell requests the worker answers, as a value: the Jupyter message that asked, the
// frame the worker is sent and the frame it answers with are all spelled here, so a frame is
// matched to the request it answers by value, never by cutting its type apart.
#include <optional>
#include <string_view>

namespace belljar {

// comm: comm_open, comm_msg and comm_close from the frontend, handed to the worker's comms in
// order with the other shell requests (as ipykernel does); answered by `done`, no reply.
// comm_info: comm_info_request, answered from the worker's live registry.
enum class RequestKind { execute, complete, inspect, is_complete, comm, comm_info };

// "execute_request", "complete_request", ... (the Jupyter message type; "comm_msg" for comm)
std::string_view request_type(RequestKind kind);
// The request behind a Jupyter message type; nullopt for those the supervisor answers itself.
std::optional<RequestKind> request_kind(std::string_view msg_type);
// The frame sent to the worker: "execute", "complete", "inspect", "is_complete".
std::string_view worker_request(RequestKind kind);
// The worker's answer: "done" for execute, else "complete_reply", ...
std::string_view worker_answer(RequestKind kind);

}  // namespace belljar
