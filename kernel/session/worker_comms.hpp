#pragma once
// The worker's comm messages, checked before anything of them reaches the page, and the output
// budget comm handlers share: parts of the Kernel's comm routing (comm_link.cpp) with one job
// each, tested alone (tests/unit/kernel/session/worker_comms.cpp).
//
// Threat: the worker writes these frames. A comm message is passed on only with a usable id
// (and target, for comm_open), an object for its data and metadata, and at most 1024 buffers,
// each canonical base64; anything else is refused with the reason, never repaired. The page
// decides how many comm messages there are (a slider dragged for a minute), so their handlers
// share one budget per window: a worker that answers every message with a flood gets at most
// --output-limit to the browser per minute.
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kernel/output/output_stream.hpp"

namespace belljar {

inline constexpr size_t kMaxCommId = 256;        // ids are uuids; names are short
inline constexpr size_t kMaxCommBuffers = 1024;  // per message
inline constexpr size_t kMaxCommInfoEntries = 10'000;

// A comm id or target name as either side may give it: a string of 1 to kMaxCommId bytes.
bool usable_comm_name(const nlohmann::json& value);

// A worker's comm_open, comm_msg or comm_close as the frontend will get it.
struct WorkerComm {
  nlohmann::json content;            // comm_id, data; target_name and target_module to open
  nlohmann::json metadata;           // {} or {"version": "2.1.0"} (comm_metadata)
  std::vector<std::string> buffers;  // decoded
  size_t size = 0;                   // what it costs the output budget: all of it
};
// A comm message's metadata as the page gets it: only a protocol `version` of digits and dots
// (ipywidgets 8's widget manager refuses a comm_open without its major version, and reads
// nothing else there); any other key, or another shape, is left out.
nlohmann::json comm_metadata(const nlohmann::json& metadata);
// The message, or why it is refused. `type`: comm_open, comm_msg or comm_close.
std::variant<WorkerComm, std::string> check_worker_comm(std::string_view type,
                                                        const nlohmann::json& frame);

// comm_info_reply's comms from the worker's frame: each entry with a usable id and target, at
// most kMaxCommInfoEntries. `known_target(id)` gives the target the page was told for that
// comm ("" when it was told of none: the entry is left out); without it, the worker's word.
nlohmann::json checked_comm_list(
    const nlohmann::json& frame,
    const std::function<std::string(const std::string&)>& known_target = nullptr);

// The budget the comm handlers share: refilled when a window has passed since it was last
// filled, and whenever a cell starts; drops are told once per window.
class CommBudgetWindow {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kWindow{60};

  // A comm handler starts: the budget it runs on (refilled to `limit` if the window is over).
  OutputBudget start_handler(Clock::time_point now, uint64_t limit);
  // It finished, having spent down to `left`: that is spent for the window.
  void handler_finished(const OutputBudget& left) { budget_ = left; }
  void cell_started() { filled_.reset(); }
  // true once per window: the first handler whose messages were withheld says so.
  bool tell_drops() { return !std::exchange(told_, true); }

 private:
  OutputBudget budget_;
  std::optional<Clock::time_point> filled_;
  bool told_ = false;
};

}  // namespace belljar
