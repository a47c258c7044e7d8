// One starter per request kind (request_starters.hpp), and the table that chooses it.
#include "kernel/session/request_starters.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "kernel/protocol/replies.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {

// A client's field of the type it should be, else the default.
std::string text(const json& content, const char* key) {
  auto it = content.find(key);
  return it != content.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool flag(const json& content, const char* key, bool fallback) {
  auto it = content.find(key);
  return it != content.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

long long integer(const json& content, const char* key, long long fallback) {
  auto it = content.find(key);
  return it != content.end() && it->is_number_integer() ? it->get<long long>() : fallback;
}

json start_execute(const StarterDoors& doors, RequestStart& start) {
  Cell& cell = start.cell;
  const WireMessage& message = start.message;
  const json& c = message.content;
  cell.code = text(c, "code");
  cell.silent = flag(c, "silent", false);
  cell.store_history = cell.silent ? false : flag(c, "store_history", true);
  cell.allow_stdin = flag(c, "allow_stdin", true);
  cell.stop_on_error = flag(c, "stop_on_error", true);
  cell.timeout = doors.policy.timeout_seconds;
  cell.cpu_limit = doors.policy.cpu_limit();
  // A client may ask for a shorter wall-clock limit (MCP's timeout_seconds), never a longer
  // one: like %%limits, the request can only tighten the policy.
  if (auto belljar = message.metadata.find("belljar");
      belljar != message.metadata.end() && belljar->is_object()) {
    auto asked = belljar->find("timeout_seconds");
    if (asked != belljar->end() && asked->is_number() && asked->get<double>() > 0)
      cell.timeout = std::min(cell.timeout, asked->get<double>());
  }
  // Handed while the session's main thread is paused (code between requests stopped at a
  // breakpoint): its time waits as the pause does.
  cell.paused.sample_cpu(start.cpu_now);
  if (start.debug_paused) cell.paused.pause(cell.started);
  cell.cpu_at_start = start.cpu_now - start.background_cpu;
  cell.background_cpu = start.background_cpu;
  cell.execution_count = start.current.count_execution(cell.silent);
  start.current.reset_budget(doors.policy.output_limit_bytes);
  doors.comms.cell_started();  // a cell refills the comms' budget too
  // A key pasted into the cell is redacted in the echo other clients see, like any output.
  if (!cell.silent)
    doors.client.publish(
        "execute_input",
        create_execute_input(doors.redactor.redact(cell.code), cell.execution_count), &message);
  // The session this cell runs in is not the one the learner last saw: say so first.
  if (!cell.silent) doors.comms.tell_session_lost(message);
  auto expressions = c.find("user_expressions");
  if (expressions != c.end() && expressions->is_object()) cell.expressions_asked = *expressions;
  return {{"type", "execute"},
          {"id", cell.id},
          {"code", cell.code},
          {"silent", cell.silent},
          {"store_history", cell.store_history},
          {"user_expressions",
           expressions != c.end() && expressions->is_object() ? *expressions : json::object()},
          {"allow_stdin", cell.allow_stdin},
          {"execution_count", cell.execution_count},
          {"msg_id", message.id()}};  // ipywidgets' Output routes by the parent's msg_id
}

json start_comm(const StarterDoors& doors, RequestStart& start) {
  Cell& cell = start.cell;
  const WireMessage& message = start.message;
  json frame = doors.comms.request_frame(message, cell.id);
  if (frame.is_null()) {
    doors.log.log("comm message dropped", message.type() + " without a comm_id or target");
    doors.client.status("idle", &message);
    return frame;
  }
  // A comm handler is code like a cell's: the same limits, a budget of its own.
  cell.timeout = doors.policy.timeout_seconds;
  cell.cpu_limit = doors.policy.cpu_limit();
  cell.cpu_at_start = start.cpu_now;
  start.current.set_budget(
      doors.comms.start_handler(Cell::Clock::now(), doors.policy.output_limit_bytes));
  return frame;
}

json start_comm_info(const StarterDoors&, RequestStart& start) {
  json frame = {{"type", "comm_info"}, {"id", start.cell.id}};
  const json& c = start.message.content;
  if (auto target = c.find("target_name"); target != c.end() && target->is_string())
    frame["target_name"] = *target;
  return frame;
}

// complete and inspect: the code and where the cursor is in it.
json start_at_cursor(const StarterDoors&, RequestStart& start) {
  const json& c = start.message.content;
  std::string code = text(c, "code");
  return {{"type", worker_request(start.cell.kind)},
          {"id", start.cell.id},
          {"code", code},
          {"cursor_pos", integer(c, "cursor_pos", static_cast<long long>(code.size()))},
          {"detail_level", integer(c, "detail_level", 0)}};
}

json start_is_complete(const StarterDoors&, RequestStart& start) {
  return {{"type", worker_request(start.cell.kind)},
          {"id", start.cell.id},
          {"code", text(start.message.content, "code")}};
}

struct StarterRow {
  RequestKind kind;
  RequestStarter start;
};
// In RequestKind's order.
constexpr std::array<StarterRow, kRequestKinds> kStarters = {{
    {RequestKind::execute, start_execute},
    {RequestKind::complete, start_at_cursor},
    {RequestKind::inspect, start_at_cursor},
    {RequestKind::is_complete, start_is_complete},
    {RequestKind::comm, start_comm},
    {RequestKind::comm_info, start_comm_info},
}};
// A row left out would be value-initialised (no starter), a row out of place would start one
// kind as another: refused at build time.
constexpr bool every_kind_has_its_row() {
  for (size_t i = 0; i < kStarters.size(); ++i)
    if (!kStarters[i].start || static_cast<size_t>(kStarters[i].kind) != i) return false;
  return true;
}
static_assert(every_kind_has_its_row(), "a RequestKind without its row in kStarters");

}  // namespace

RequestStarter request_starter(RequestKind kind) {
  return kStarters.at(static_cast<size_t>(kind)).start;
}

}  // namespace belljar
