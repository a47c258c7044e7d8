#pragma once
// The supervisor: a single-threaded reactor over the Jupyter sockets and the worker's frame
// socket and output pipes. It never runs user code and never blocks on the worker, so control
// messages (interrupt, shutdown) are served even while a cell spins.
// Requests arrive through a Frontend (Jupyter's sockets, MCP, the runner); the core is the same.
//   reactor.cpp      the loop: poll, signals, timers, the launching client (parent_watch.hpp)
//   requests.cpp     requests: dispatch, replies (the queue: request_queue.hpp)
//   worker_link.cpp  the worker: start, frames in and out, its output pipes, faults, exits
//                    (the outbox and the text cursors: worker_channel.hpp)
//   cell_limits.cpp  a cell's limits: timeout, CPU, memory, %%limits (asked_limits.hpp), the
//                    errors naming them
//   cell_records.cpp what a request leaves: reply (its payload: kernel/output/payloads.hpp),
//                    audit record, metrics; restart policy
//   comm_link.hpp    the worker's comm messages: routed to the frontend, checked, counted;
//                    the frontend's, handed to the worker during a cell (a part of its own)
//   idle_link.hpp    output of code running between requests (asyncio tasks, threads): shown
//                    parented to the last cell, on a budget of its own (a part of its own)
//   egress_link.hpp  the egress proxy's decisions: audit, metrics, the cell's denied hosts
//   debug_link.cpp   the debugger: debug_request on control, handed to the worker's debug
//                    channel (fd 4), its replies and events checked, charged and relayed (the
//                    pending table, deadlines, started state, event rate: debug_requests.hpp)
//   workspace_link.cpp  the workspace guard's surveys: new guards, the quota (when to survey
//                    and what a survey means: workspace_surveys.hpp, a part of its own)
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
#include "kernel/output/output_stream.hpp"
#include "kernel/output/redactor.hpp"
#include "kernel/output/widget_models.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "kernel/session/background_cpu.hpp"
#include "kernel/session/cell.hpp"
#include "kernel/session/client_channel.hpp"
#include "kernel/session/comm_link.hpp"
#include "kernel/session/debug_requests.hpp"
#include "kernel/session/doors.hpp"
#include "kernel/session/egress_link.hpp"
#include "kernel/session/frontend.hpp"
#include "kernel/session/history.hpp"
#include "kernel/session/idle_link.hpp"
#include "kernel/session/newest_entries.hpp"
#include "kernel/session/output_checks.hpp"
#include "kernel/session/parent_watch.hpp"
#include "kernel/session/request_kind.hpp"
#include "kernel/session/request_queue.hpp"
#include "kernel/session/usage.hpp"
#include "kernel/session/worker_channel.hpp"
#include "kernel/session/worker_comms.hpp"
#include "kernel/session/worker_frames.hpp"
#include "kernel/session/workspace_surveys.hpp"
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

// The WorkerDoor the parts are given: fd 3's outbox and the worker's fault, both still the
// Kernel's until the worker link owns the channel.
class KernelWorkerDoor final : public WorkerDoor {
 public:
  explicit KernelWorkerDoor(Kernel& kernel) : kernel_(kernel) {}
  void send(const json& frame) override;
  void fault(const std::string& why) override;

 private:
  Kernel& kernel_;
};

// The core as the idle link sees it (idle_link.hpp): the running request and the pipes' text,
// the Kernel's until the worker link owns them.
class KernelIdleCore final : public IdleLink::Core {
 public:
  explicit KernelIdleCore(Kernel& kernel) : kernel_(kernel) {}
  const WireMessage* running() const override;
  const WireMessage* served() const override;
  void take_output(WorkerFrame type, const json& frame) override;
  OutputBudget& running_budget() override;
  void show_pipes() override;

 private:
  Kernel& kernel_;
};

class Kernel {
  // tests/fuzz/fuzz_kernel_frames.cpp: the frame handlers driven without a sandbox.
  friend struct KernelProbe;
  friend class KernelWorkerDoor;
  friend class KernelIdleCore;

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
  bool executing() const { return cell_ && cell_->kind == RequestKind::execute; }
  // A request whose code may produce output: a cell, or a comm message's handler.
  bool running_code() const {
    return cell_ && (cell_->kind == RequestKind::execute || cell_->kind == RequestKind::comm);
  }
  // Such a request, once the worker has it: output that says nothing of its request (the
  // pipes' text, `idle` frames) is then its own, else output between requests.
  bool worker_runs_code() const { return running_code() && cell_->in_worker; }

  // reactor.cpp
  void poll_once();
  void handle_signals();
  Clock::time_point next_deadline() const;

  // requests.cpp
  void serve_control(const WireMessage& message);
  // A request whose handling threw: logged (rate-limited), an error reply where one is due.
  void request_failed(Channel channel, const WireMessage& message, const std::exception& e);
  void dispatch_next();
  void start_request(const WireMessage& message);
  void answer_locally(Channel channel, const WireMessage& message);
  void abort_queued_executes();
  std::string banner() const;
  std::string sandbox_banner() const;
  // An execute_request answered with an error without running (no sandbox, --audit-required).
  void refuse_execute(const WireMessage& request, const std::string& ename,
                      const std::string& evalue);
  json kernel_info() const;  // kernel_info_reply's content

  // worker_link.cpp
  void start_worker();
  void send_to_worker(const json& frame);
  void flush_outbox();
  void fault_worker(const std::string& why);
  void read_frames();
  using FrameHandler = void (Kernel::*)(const json&);
  // Decoded and handled, each frame a boundary (a frame whose handling throws is a fault).
  void take_frames(WorkerFrameDecoder& decoder, std::string_view bytes, FrameHandler handle);
  // A turn's worth of what `fd` holds, handed to take_frames; false at EOF.
  bool read_socket(int fd, WorkerFrameDecoder& decoder, FrameHandler handle, const bool& open);
  void read_pipe(int index, size_t budget);
  void drain_pipes();
  void read_output_before(const json& frame);
  void learn_uncounted_output(const json& done);
  void flush_streams(bool final);
  // One frame of the worker's, parsed into its type once: one handler per type below.
  void handle_frame(const json& frame);
  bool answers_current_request(const json& frame) const;
  void on_hello(const json& frame);
  void on_output(WorkerFrame type, const json& frame);  // display, update_display, result
  void on_clear_output(const json& frame);
  void on_error(const json& frame);
  void on_input_request(const json& frame);
  void on_audit_request(const json& frame);
  void on_done(const json& frame);
  const WireMessage* output_parent() const;
  // What the worker's output is charged to now: the running cell's or comm handler's budget,
  // else the budget of output between requests (idle_output.hpp).
  OutputBudget& output_budget();
  void on_worker_exit(const WorkerExit& exit);
  void drop_worker();

  // cell_limits.cpp
  void check_limits(Clock::time_point now);
  // The running request's time so far that --timeout counts: paused time is not, up to the
  // pause allowance (--debug-pause).
  double counted_seconds(Clock::time_point now) const;
  Clock::time_point timeout_deadline(Clock::time_point now) const;
  // The worker's word on its main thread (debug_state): paused in the debugger, or running.
  void note_debug_pause(bool paused, Clock::time_point now);
  void check_background_cpu(Clock::time_point now);
  void handle_limits(const json& frame);
  void name_limit_in_error(std::string& ename, std::string& evalue, json& traceback) const;
  void fail_cell_after_exit(const WorkerExit& exit, const std::string& cause);

  // cell_records.cpp
  json execution_facts() const;
  json secret_totals() const;
  void finish_cell(const json& done);
  void finish_request_reply(const json& reply);
  void fail_cell(const std::string& ename, const std::string& evalue, CellStatus outcome);
  void schedule_restart(const std::string& why);

  // requests.cpp: where a request's output begins (output before it: idle_link.hpp)
  void take_output_between_requests();
  // The request's frame to the worker: the boundary between output between requests and its own.
  void hand_to_worker(const json& frame);
  // Where output no request answers goes (idle_link.hpp).
  const WireMessage* background_parent() const { return idle_.background_parent(); }

  // The egress proxy's decisions taken now, the running cell's share put in it.
  void handle_egress();

  // debug_link.cpp
  void serve_debug_request(const WireMessage& message);
  // The control reply (debug_reply, parented to the request), then idle.
  void answer_debug_request(const WireMessage& request, json content);
  // Why no debug request can be handed to the worker now; "" when one can.
  std::string debug_unavailable() const;
  // An audit record for a request that runs code; false when it must be refused
  // (--audit-required and the audit log is failing), with `refusal` saying why.
  bool audit_debug_code(const WireMessage& request, const std::string& code, std::string& refusal);
  void flush_debug_outbox();
  void read_debug_frames();
  void handle_debug_frame(const json& frame);
  void on_debug_reply(const json& frame);
  void on_debug_event(const json& frame);
  // A reply's or an event's content as the client may get it: redacted, a rich inspection's
  // bundle checked as a display's, charged to the output budget; nullopt past the budget.
  std::optional<json> checked_debug_content(json content, bool rich_bundle);
  // An event the frontend's state hangs on could not be relayed (past the budget, or larger
  // than an event may be): the debug session ends, with a notice.
  void debug_stopped_for_budget(const std::string& event, size_t bytes);
  void check_debug_deadlines(Clock::time_point now);
  // The worker is gone, or its debug channel: every pending request answered with `why`, the
  // debug session's state cleared.
  void end_debug_session(const std::string& why);
  void release_held_debug_requests();
  DebugRequests debug_requests_;
  WorkerFrameDecoder debug_decoder_;
  WorkerOutbox debug_outbox_;
  bool debug_open_ = false;                        // fd 4 polled until EOF or a fault
  std::optional<Clock::time_point> debug_eof_at_;  // EOF seen: pending answered then
  bool worker_debugger_ = false;                   // hello said `debugger: true`
  std::vector<WireMessage> held_debug_;            // arrived before hello
  std::deque<WireMessage> queued_debug_;           // waiting for the one being answered
  // The last debug_request's header: the parent of the debug events (as ipykernel parents them).
  std::optional<WireMessage> last_debug_request_;

  // workspace_link.cpp
  bool surveys_workspace() const;
  void request_survey(bool measure);
  void hold_for_survey(json frame);
  void schedule_survey(Clock::time_point now);
  void handle_surveys();
  void handle_refusals();
  void tell_workspace_notices();

  KernelOptions options_;
  // Before the audit log: a --metrics refused at start leaves no empty log file behind, and the
  // metrics the log counts its failures in outlive it.
  Metrics metrics_;
  AuditLog audit_;
  Redactor redactor_;
  RateLimitedLog request_log_;
  RateLimitedLog frame_log_;  // what the worker can trigger: unknown, stale, refused frames
  // What every piece of the worker's output passes: bundles, redaction, active output, the
  // widget models (output_checks.hpp).
  OutputChecks checks_{redactor_, options_.policy.active_output};
  ClientChannel client_;  // the frontend, as the parts may use it (doors.hpp)
  History history_;
  UsageSampler usage_;
  Fd signals_;
  // The client that launched the kernel (JPY_PARENT_PID), read as the kernel is made: when it
  // exits, the kernel shuts down (parent_watch.hpp).
  ParentWatch parent_ = ParentWatch::from_environment(::getenv("JPY_PARENT_PID"));
  void client_gone();

  // The egress proxy (its own thread), when the policy allows any host; each new sandbox's
  // channel is attached to it (egress_link.hpp).
  EgressLink egress_{audit_, metrics_, frame_log_};
  std::optional<WorkerProcess> worker_;
  KernelWorkerDoor worker_door_{*this};
  // The comms: the worker's checked and counted, the frontend's handed during a cell
  // (comm_link.hpp).
  CommLink comms_{client_, worker_door_, checks_, frame_log_, request_log_};
  KernelIdleCore idle_core_{*this};
  // Output between requests, and output naming an earlier request (idle_link.hpp).
  IdleLink idle_{client_, checks_, frame_log_, idle_core_, options_.policy.output_limit_bytes};
  WorkerFrameDecoder decoder_;
  WorkerOutbox outbox_;
  bool worker_ready_ = false;
  bool pipe_open_[2] = {false, false};
  OutputCursors cursors_;     // where its frames fall in the text of fd 1/2 (read_output_before)
  bool frames_open_ = false;  // polled until EOF or a fault
  std::optional<Clock::time_point> frames_eof_at_;  // EOF seen: at fault if still running then
  json language_info_ = json::object();
  // What the running sandbox lacks or does differently (WorkerProcess::notes): for the banner,
  // kernel_info_reply (belljar.notes) and the audit log.
  std::vector<std::string> sandbox_notes_;
  std::optional<Clock::time_point> restart_at_;
  int failed_starts_ = 0;
  std::string start_error_;

  RequestQueue queue_;  // requests waiting for the worker (request_queue.hpp)
  std::optional<Cell> cell_;
  int execution_count_ = 0;
  uint64_t requests_started_ = 0;  // source of the frame ids of requests
  // The `cell` audit records %audit may show, newest last: kept as text (about 500 bytes a
  // cell, where parsed records took 1.8 KiB), the last 100 and within 256 KiB, since with
  // --audit-code or many displays one record can be large. %audit shows 10 by default; the
  // audit log has every record, and each kernel of a host's hundreds holds these.
  NewestEntries<std::string> recent_cells_{100, 256u << 10};
  OutputBudget budget_;
  StreamBuffer streams_[2];  // stdout, stderr
  bool shutting_down_ = false;
  // The workspace guard: when to survey, the cell held for its survey, the quota, what to
  // tell the learner at the next chance (workspace_surveys.hpp).
  WorkspaceSurveys surveys_;
  int restarts_ = 0;
  BackgroundCpu background_;
  Clock::time_point next_cpu_sample_{};
  std::optional<std::string> background_stop_;  // why the sandbox was stopped between cells
};

}  // namespace belljar
