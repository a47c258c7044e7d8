#pragma once
// The supervisor: a single-threaded reactor over the Jupyter sockets and the worker's frame
// socket and output pipes. It never runs user code and never blocks on the worker, so control
// messages (interrupt, shutdown) are served even while a cell spins.
// Requests arrive through a Frontend (Jupyter's sockets, MCP, the runner); the core is the same.
// The core (the reactor, the request queue, the running request, the wiring) is this class, in
//   reactor.cpp      the loop: poll, timers; the host's signals and the launching client
//                    (host_signals.hpp)
//   requests.cpp     requests: dispatch, replies (the queue: request_queue.hpp, the request
//                    being served: current_request.hpp, each kind's start: request_starters.hpp)
//   worker.cpp       the worker's start and exits, and each of its frames to the part it is for
//   kernel_core.cpp  KernelCore: the core's answers to the parts' narrow interfaces
// and the parts own their state, each in a header of its own that says what it may touch (its
// doors: doors.hpp), each unit-tested through fakes of them:
//   worker_link.hpp  the worker's channel: fd 3's frames (outbox, reading: frame_reader.hpp),
//                    its text on fd 1 and 2 placed before the frames (worker_channel.hpp), faults
//   worker_life.hpp  the worker's lifecycle: starting, ready (its hello), started again at once
//                    or after a back-off, refused at launch; language_info, notes, restarts
//   kernel_info.hpp  the kernel's self-description: kernel_info_reply and its banner
//   cell_records.hpp what a finished cell leaves: its reply (its payload:
//                    kernel/output/payloads.hpp), audit record, metrics, history, %audit's list
//   cell_limits.hpp  a cell's limits: timeout, CPU, memory, %%limits (asked_limits.hpp), CPU
//                    between cells, the errors naming them
//   cell_output.hpp  what the worker's output frames mean for the running request: displays,
//                    results, errors, input() prompts, %audit's question
//   comm_link.hpp    the worker's comm messages: routed to the frontend, checked, counted;
//                    the frontend's, handed to the worker during a cell
//   idle_link.hpp    output of code running between requests (asyncio tasks, threads): shown
//                    parented to the last cell, on a budget of its own
//   egress_link.hpp  the egress proxy's decisions: audit, metrics, the cell's denied hosts
//   debug_link.hpp   the debugger: debug_request on control, handed to the worker's debug
//                    channel (fd 4), its replies and events checked, charged and relayed (the
//                    pending table, deadlines, started state, event rate: debug_requests.hpp)
//   workspace_link.hpp  the workspace guard's surveys: new guards, the quota (when to survey
//                    and what a survey means: workspace_surveys.hpp)
//   output_checks.hpp, output_publisher.hpp  what every piece of output passes, and the one step
//                    that publishes it; client_channel.hpp  the client door on the frontend
#include <chrono>
#include <cstdlib>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kernel/observability/audit_log.hpp"
#include "kernel/observability/audit_throttle.hpp"
#include "kernel/observability/diagnostics.hpp"
#include "kernel/observability/metrics.hpp"
#include "kernel/observability/observability.hpp"
#include "kernel/output/output_stream.hpp"
#include "kernel/output/redactor.hpp"
#include "kernel/output/widget_models.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "kernel/session/cell.hpp"
#include "kernel/session/cell_limits.hpp"
#include "kernel/session/cell_output.hpp"
#include "kernel/session/cell_records.hpp"
#include "kernel/session/client_channel.hpp"
#include "kernel/session/comm_link.hpp"
#include "kernel/session/current_request.hpp"
#include "kernel/session/debug_link.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/egress_link.hpp"
#include "kernel/session/frontend.hpp"
#include "kernel/session/history.hpp"
#include "kernel/session/host_signals.hpp"
#include "kernel/session/idle_link.hpp"
#include "kernel/session/newest_entries.hpp"
#include "kernel/session/output_checks.hpp"
#include "kernel/session/request_kind.hpp"
#include "kernel/session/request_queue.hpp"
#include "kernel/session/usage.hpp"
#include "kernel/session/worker_comms.hpp"
#include "kernel/session/worker_frames.hpp"
#include "kernel/session/worker_life.hpp"
#include "kernel/session/worker_link.hpp"
#include "kernel/session/workspace_link.hpp"
#include "sandbox/egress_api/egress_module.hpp"
#include "sandbox/jail_client/worker_process.hpp"
#include "sandbox/os/fd.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct KernelOptions {
  Policy policy;
  WorkerLaunch launch;
  std::string session_id;  // this kernel's identity in headers and the audit log
  // belljar-egress.so (resources.cpp), loaded only when the policy allows a host.
  std::string egress_module;
  // Bound secrets (--secret): read by the Kernel itself when it starts (with_bound_secrets).
  std::shared_ptr<const BoundSecrets> secrets;
};

class Kernel;

// The core as its parts ask for it: the running request's facts and the core's own steps, one
// line each (kernel_core.cpp), for every part's narrow interface at once: DebugCore
// (debug_link.hpp), IdleLink::Core (idle_link.hpp), WorkerLink::Core (worker_link.hpp) and
// CellOutput::Prompt (cell_output.hpp). It alone reaches into the Kernel; a part sees only its
// own interface.
class KernelCore final : public DebugCore,
                         public IdleLink::Core,
                         public WorkerLink::Core,
                         public CellOutput::Prompt {
 public:
  explicit KernelCore(Kernel& kernel) : kernel_(kernel) {}
  // DebugCore (output_budget and background_parent answer WorkerLink::Core too)
  OutputBudget& output_budget() override;
  const WireMessage* output_parent() const override;
  const WireMessage* background_parent() const override;
  std::optional<int> execution_count() const override;
  void note_pause(bool paused, Clock::time_point now) override;
  void end_pause(Clock::time_point now) override;
  void read_output_before(const json& frame) override;
  // IdleLink::Core
  const WireMessage* running() const override;
  const WireMessage* served() const override;
  void take_output(WorkerFrame type, const json& frame) override;
  OutputBudget& running_budget() override;
  void show_pipes() override;
  // WorkerLink::Core
  void text_read() override;
  void handle(const json& frame) override;
  void faulted() override;
  // CellOutput::Prompt
  void request_input(const WireMessage& request, json content) override;
  // What the worker's output frames mean for the running request (cell_output.hpp): it holds no
  // state, so it is made for each frame from the Kernel's doors, as OutputPublisher is.
  CellOutput cell_output();

 private:
  Kernel& kernel_;
};

class Kernel {
  // tests/fuzz/fuzz_kernel_frames.cpp: the frame handlers driven without a sandbox.
  friend struct KernelProbe;
  friend class KernelCore;

 public:
  // Signals are blocked here: construct before anything starts threads (ZMQ's included).
  explicit Kernel(KernelOptions options);
  ~Kernel();
  // Starts the first worker (throws SandboxError: the kernel refuses to start), then serves
  // the frontend until shutdown. Returns the process exit status.
  int run(Frontend& frontend);

  // What a frontend hands in.
  void submit_control(const WireMessage& message);
  void submit_shell(WireMessage message);
  void deliver_input(const std::string& value);
  void interrupt_cell();
  // A fresh Python session (MCP's reset_session): the worker is replaced at once; the
  // workspace stays. A running cell fails as if the worker had died.
  void restart_worker(const std::string& why);
  void request_shutdown();
  bool shutting_down() const { return shutting_down_; }
  const std::string& session_id() const { return options_.session_id; }

 private:
  // reactor.cpp
  void poll_once();
  Clock::time_point next_deadline() const;

  // requests.cpp
  void serve_control(const WireMessage& message);
  // A request whose handling threw: logged (rate-limited), an error reply where one is due.
  void request_failed(Channel channel, const WireMessage& message, const std::exception& e);
  void dispatch_next();
  void start_request(const WireMessage& message);
  void answer_locally(Channel channel, const WireMessage& message);
  void abort_queued_executes();
  // An execute_request answered with an error without running (no sandbox, --audit-required).
  void refuse_execute(const WireMessage& request, const std::string& ename,
                      const std::string& evalue);

  // worker.cpp (the channel itself is the worker link's: worker_link.hpp)
  void start_worker();
  // One frame of the worker's, parsed into its type once: one handler per type below.
  void handle_frame(const json& frame);
  void on_hello(const json& frame);
  void on_done(const json& frame);
  void on_checkpoint_request(const json& frame);
  void on_worker_exit(const WorkerExit& exit);
  void drop_worker();

  // A request's end: its reply (its record: cell_records.hpp), the next request started.
  void finish_cell(const json& done);
  void finish_request_reply(const json& reply);
  void fail_cell(const std::string& ename, const std::string& evalue, CellStatus outcome);

  // requests.cpp: where a request's output begins (output before it: idle_link.hpp)
  void take_output_between_requests();
  // The request's frame to the worker: the boundary between output between requests and its own.
  void hand_to_worker(const json& frame);
  // Where output no request answers goes (idle_link.hpp).
  const WireMessage* background_parent() const { return idle_.background_parent(); }

  // The egress proxy's decisions taken now, the running cell's share put in it.
  void handle_egress();

  // The warden's reports (workspace_link.hpp): the broker's refusals, then each survey's step.
  void take_workspace_reports();

  KernelOptions options_;
  // The metrics, the audit log and the rate-limited logs of what clients and the worker can
  // trigger (observability.hpp).
  Observability obs_;
  // What every piece of the worker's output passes: bundles, redaction (the Redactor it owns),
  // active output, the widget models (output_checks.hpp).
  OutputChecks checks_;
  ClientChannel client_;  // the frontend, as the parts may use it (doors.hpp)
  UsageSampler usage_;
  // SIGINT, SIGTERM, SIGHUP on a signalfd, and the client that launched the kernel
  // (JPY_PARENT_PID), read as the kernel is made: when it exits, the kernel shuts down
  // (host_signals.hpp).
  HostSignals host_{ParentWatch::from_environment(::getenv("JPY_PARENT_PID"))};

  // The egress proxy (its own thread), when the policy allows any host; each new sandbox's
  // channel is attached to it (egress_link.hpp).
  EgressLink egress_{obs_.audit, obs_.metrics, obs_.frame_log};
  std::optional<WorkerProcess> worker_;
  // What the parts ask of the core (kernel_core.cpp).
  KernelCore core_{*this};
  // The worker's channel: frames on fd 3, its text on fd 1 and 2, faults (worker_link.hpp).
  WorkerLink worker_link_{client_, obs_.audit, obs_.frame_log, checks_.redactor(), core_};
  // JupyterLab's debugger: debug_request handed to the worker's debug channel (fd 4), its
  // replies and events checked, charged and relayed (debug_link.hpp).
  DebugLink debug_{client_,        obs_.audit,
                   worker_link_,   checks_,
                   obs_.frame_log, {options_.policy.audit_required, options_.policy.audit_code},
                   core_};
  // The comms: the worker's checked and counted, the frontend's handed during a cell
  // (comm_link.hpp).
  CommLink comms_{client_, worker_link_, checks_, obs_.frame_log, obs_.request_log};
  // Output between requests, and output naming an earlier request (idle_link.hpp).
  IdleLink idle_{client_, checks_, obs_.frame_log, core_, options_.policy.output_limit_bytes};
  // The worker's life: starting, ready (its hello), or waiting out a back-off after a failed
  // start; its language_info, the sandbox's notes, the restarts (worker_life.hpp).
  WorkerLife life_;

  RequestQueue queue_;  // requests waiting for the worker (request_queue.hpp)
  // The request being served: its Cell, frame ids, execution count, budget (current_request.hpp).
  CurrentRequest current_{options_.policy.checkpoints};
  // What a finished cell leaves: its reply, audit record, metrics, history (cell_records.hpp).
  CellRecords records_{options_.policy, options_.session_id, obs_.audit, obs_.metrics,
                       obs_.frame_log,  checks_.redactor(),  client_};
  bool shutting_down_ = false;
  // The workspace guard's surveys and the broker's refusals (workspace_link.hpp).
  WorkspaceLink workspace_{obs_.audit, client_, options_.policy.workspace_quota_bytes};
  // The running request's limits, and CPU spent between cells (cell_limits.hpp).
  CellLimits limits_{options_.policy, obs_.audit, obs_.metrics, obs_.frame_log, client_};
};

}  // namespace belljar
