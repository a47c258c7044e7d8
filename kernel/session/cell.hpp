#pragma once
// A request the worker is handling now (a cell, a comm message's handler, a lookup): what the
// client asked, the limits it runs under, and the facts its reply and audit record will carry.
// The core holds one (kernel.hpp); the parts are handed it where their header says so.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernel/observability/metrics.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "kernel/session/debug_requests.hpp"
#include "kernel/session/request_kind.hpp"

namespace belljar {

// What the egress proxy decided during a cell: the hosts it refused (execute_reply metadata
// belljar.egress_denied) and the requests to hosts with a bound secret: count, values put in,
// time spent, the tokens a model API reported (belljar.secrets).
struct CellEgress {
  std::vector<std::string> denied;  // host:port, each once, at most kDeniedPerCell
  struct SecretTotals {
    uint64_t requests = 0, injected = 0, input_tokens = 0, output_tokens = 0;
    double latency_ms = 0;
  } secrets;
  static constexpr size_t kDeniedPerCell = 100;
};

// A shell request the worker is handling now.
struct Cell {
  using Clock = std::chrono::steady_clock;
  using json = nlohmann::json;

  WireMessage request;
  RequestKind kind = RequestKind::execute;
  std::string id;  // frame id
  // Its frame was sent to the worker (a cell is first held for its workspace survey): until
  // then, what the worker outputs came between requests (idle_link.cpp).
  bool in_worker = false;
  int execution_count = 0;
  bool silent = false, store_history = true, stop_on_error = true, allow_stdin = false;
  std::string code;
  Clock::time_point started;
  std::string started_iso;
  double timeout = 0, cpu_limit = 0;
  double cpu_at_start = 0;                   // less the background CPU charged to the cell
  double background_cpu = 0;                 // spent between cells, charged to this one
  std::optional<Clock::time_point> kill_at;  // set once an interrupt for a limit was sent
  // Time the worker said its main thread was paused in the debugger: not counted by the
  // timeout, up to --debug-pause (cell_limits.cpp).
  PausedTime paused;
  LimitHit limit_hit = LimitHit::none;
  bool user_interrupted = false;
  std::optional<CellStatus> outcome;               // set when the cell was failed by the supervisor
  uint64_t memory_limit = 0;                       // %%limits --memory moved the cap for this cell
  std::optional<double> magic_timeout, magic_cpu;  // as %%limits asked, for the error text
  std::optional<json> error;                       // ename, evalue, traceback
  json displays = json::array();                   // mime types of each display, for the audit
  std::string result_text;                         // text/plain of the result, for history
  uint64_t comm_published = 0, comm_dropped = 0;   // the worker's comm messages (comm_link.cpp)
  std::string comm_first_drop;                     // why the first one was withheld
  uint64_t widget_values_cleaned = 0;              // widget traits with active parts removed
  CellEgress egress;  // what the egress proxy decided for it (egress_link.hpp)
  json expressions_asked =
      json::object();  // the client's user_expressions: the only names answered
};

}  // namespace belljar
