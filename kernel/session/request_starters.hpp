#pragma once
// One starter per request kind (request_kind.hpp): what a shell request is when it starts, and
// the frame it sends the worker, each built by its own function and chosen by a table indexed
// by RequestKind, so a kind with no starter fails to build (request_starters.cpp) and the unit
// test enumerates the kinds against it. The core (Kernel::start_request) gives the request its
// id and start, asks the starter, and hands the frame on.
// Threat: a client's fields. Each starter reads only the fields its kind has, of the type they
// should be (anything else takes the default); a cell's asked timeout only tightens the policy;
// its code is redacted in the execute_input echo other clients see; a comm message without a
// comm_id (or a comm_open without a target) does not start, and is logged.
// Doors: the client, the comm link (a handler's frame and budget, a cell's refill), the request
// log, the redactor, the policy; of the running request, its execution count and budget.
#include <cstddef>
#include <nlohmann/json.hpp>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/output/redactor.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "kernel/session/cell.hpp"
#include "kernel/session/comm_link.hpp"
#include "kernel/session/current_request.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/request_kind.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

// comm_info is RequestKind's last.
inline constexpr size_t kRequestKinds = static_cast<size_t>(RequestKind::comm_info) + 1;

// What the starters may use: given by reference, for one start.
struct StarterDoors {
  ClientDoor& client;
  CommLink& comms;
  RateLimitedLog& log;
  const Redactor& redactor;
  const Policy& policy;
};

// A request as it starts: the client's message, its Cell (kind, request, id and start time set;
// the starter fills in the rest), the request being served (its count and budget), and the
// session's facts now.
struct RequestStart {
  const WireMessage& message;
  Cell& cell;
  CurrentRequest& current;
  double cpu_now = 0;         // the session's CPU seconds
  double background_cpu = 0;  // spent between cells, charged to this one (background_cpu.hpp)
  bool debug_paused = false;  // the session's main thread is paused in the debugger
};

// The frame a request sends the worker; null when the request does not start (its busy is
// answered with idle, and it is logged).
using RequestStarter = nlohmann::json (*)(const StarterDoors& doors, RequestStart& start);
RequestStarter request_starter(RequestKind kind);
inline nlohmann::json start_request_frame(const StarterDoors& doors, RequestStart& start) {
  return request_starter(start.cell.kind)(doors, start);
}

}  // namespace belljar
