#pragma once
// Output of code running between requests: the session's asyncio loop runs while the worker
// waits for the next request (worker/belljar_worker/event_loop.py), and a thread a cell started
// runs on after it. What they print reaches the pipes like any text; what they display or send
// to a widget comes as frames marked `idle` in place of a request's id (worker/PROTOCOL.md).
//
// As the pipes' text: while a cell or a comm handler runs, such a frame is that request's output
// (its budget, its parent: handed back to the core, Core::take_output); otherwise it is shown
// between cells, parented to the last cell as ipykernel parents it to its last request, and
// charged to the budget of output between requests (idle_output.hpp), told once a window when it
// withheld anything. The frame passes the same checks as a request's: bundles, redaction, active
// output, the widget models (output_publisher.hpp). Only output may come so (request_kind.hpp's
// idle_output): a result, an error, a done or a question sent between requests is dropped, so
// such a frame can never end or steer a request.
//
// Output may also name the request it belongs to (`parent`): a task keeps the cell that made it,
// a thread may name one (worker/belljar_worker/output_parents.py). It goes to that request if
// the worker was given it (request_parents.hpp, learnt as each request is handed), whenever it
// comes: the same checks, and the budget of output between requests unless it is the running
// request's own.
// Threat: the worker chooses when it outputs and which request it names; never where it lands
// or what budget it eats: output between requests never lands in, or is charged to, a request it
// does not belong to.
// Doors: the client, the output checks, the diagnostics log, --output-limit, and the core (Core,
// below: the running request and the pipes' text, which the core holds).
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "kernel/observability/diagnostics.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/idle_output.hpp"
#include "kernel/session/output_checks.hpp"
#include "kernel/session/output_publisher.hpp"
#include "kernel/session/request_kind.hpp"
#include "kernel/session/request_parents.hpp"
#include "kernel/session/worker_frames.hpp"

namespace belljar {

class IdleLink {
 public:
  using Clock = std::chrono::steady_clock;

  // What the link asks of the core: the request being served and the pipes' text are its.
  class Core {
   public:
    virtual ~Core() = default;
    // The request the worker runs code for now (a cell, a comm handler); null when none does.
    virtual const WireMessage* running() const = 0;
    // The request the worker is serving now (any kind, or the comm handler running during the
    // cell), to which output naming nothing goes; null between requests.
    virtual const WireMessage* served() const = 0;
    // Output of running(): handled as its own frames are (display, update_display, clear_output,
    // a comm message), on its budget.
    virtual void take_output(WorkerFrame type, const nlohmann::json& frame) = 0;
    // running()'s budget, which its text is charged to.
    virtual OutputBudget& running_budget() = 0;
    // The pipes' text read so far, shown now (what was written before comes first).
    virtual void show_pipes() = 0;
  };

  IdleLink(ClientDoor& client, OutputChecks& checks, RateLimitedLog& frame_log, Core& core,
           uint64_t output_limit)
      : client_(client),
        checks_(checks),
        frame_log_(frame_log),
        core_(core),
        output_limit_(output_limit),
        publisher_(client, checks, frame_log) {}

  // A frame marked `idle`.
  void on_idle_frame(WorkerFrame type, const nlohmann::json& frame);
  // A frame that names its request (`parent`, names_a_parent).
  void on_parented_output(WorkerFrame type, const nlohmann::json& frame);
  // The budget output between requests is charged to at `now` (the pipes' text included).
  OutputBudget& budget(Clock::time_point now) { return idle_output_.budget(now, output_limit_); }
  // Told once a window that output between requests was withheld.
  void tell_withheld();
  // A request was handed to the worker: its output may come later naming it, and output between
  // requests goes to the last cell.
  void handed(const WireMessage& request, RequestKind kind);
  // Where output no request answers goes: the request being served, else the last cell (as
  // ipykernel parents it to its last request); null before any cell.
  const WireMessage* background_parent() const;
  const WireMessage* last_cell() const { return last_cell_ ? &*last_cell_ : nullptr; }

 private:
  void publish_background(WorkerFrame type, const nlohmann::json& frame, const WireMessage* parent);

  ClientDoor& client_;
  OutputChecks& checks_;
  RateLimitedLog& frame_log_;
  Core& core_;
  uint64_t output_limit_;
  OutputPublisher publisher_;
  IdleOutput idle_output_;
  RequestParents request_parents_;
  // The header alone of the last cell handed to the worker, not its code (megabytes, maybe),
  // which is not kept once the cell is over.
  std::optional<WireMessage> last_cell_;
};

}  // namespace belljar
