// The supervisor's side of the worker: its frames, its output pipes, its exits and restarts.
// Everything read here comes from untrusted code and is checked before it reaches a client.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "kernel/output/active_output.hpp"
#include "kernel/output/bundle_check.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/buffer_room.hpp"
#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/protocol/signer.hpp"
#include "kernel/session/cell_budget.hpp"
#include "kernel/session/frame_reader.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

namespace {
const char* kStreamNames[] = {"stdout", "stderr"};

constexpr size_t kDrainBudget = 16u << 20;  // pipe bytes read in one go before a frame
constexpr auto kFramesEofGrace = std::chrono::seconds(2);
constexpr size_t kDisplaysAudited = 1000;   // mime lists kept per cell for the audit record
constexpr uint64_t kInputRequestCost = 64;  // what one input_request is charged, prompt aside

}  // namespace

void Kernel::start_worker() {
  worker_ready_ = false;
  workspace_.new_warden();
  decoder_ = WorkerFrameDecoder();
  outbox_.clear();
  debug_.new_worker();
  debug_.readiness(worker_ready_, start_error_);
  checks_.widgets().forget_all();  // the page's comms were the old worker's
  frames_open_ = true;
  frames_eof_at_.reset();
  try {
    worker_.emplace(WorkerProcess::start(options_.policy, options_.launch));
  } catch (const SandboxError& e) {
    worker_.reset();
    if (restarts_ == 0 && failed_starts_ == 0) throw;  // at launch: refuse to start
    start_error_ = std::string("the sandbox could not be started: ") + e.what();
    debug_.readiness(worker_ready_, start_error_);
    schedule_restart(start_error_);
    dispatch_next();  // fails queued cells with the reason
    for (auto& held : debug_.take_held()) submit_control(held);  // refused with the reason
    return;
  }
  debug_.attach(worker_->debug_fd());
  for (int fd :
       {worker_->frames_fd(), worker_->debug_fd(), worker_->stdout_fd(), worker_->stderr_fd()})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  pipe_open_[0] = pipe_open_[1] = true;
  cursors_.reset();
  // This sandbox's connections to 127.0.0.1:3128 arrive on its channel.
  if (egress_.running()) egress_.attach(worker_->take_egress_channel());
  sandbox_notes_ = worker_->notes();
  audit_.record("worker_start", {{"pid", worker_->pid()},
                                 {"isolation", isolation_name(options_.policy.isolation)},
                                 {"restart", restarts_}});
}

void KernelWorkerDoor::send(const json& frame) {
  kernel_.send_to_worker(frame);
}

const WireMessage* KernelIdleCore::running() const {
  return kernel_.worker_runs_code() ? &kernel_.cell_->request : nullptr;
}

const WireMessage* KernelIdleCore::served() const {
  if (!kernel_.cell_ || !kernel_.cell_->in_worker) return nullptr;
  // The text of a comm handler running during the cell is its message's, as ipykernel's is.
  if (const WireMessage* handler = kernel_.comms_.running(); handler && kernel_.executing())
    return handler;
  return &kernel_.cell_->request;
}

// As the running request's frames are handled (handle_frame).
void KernelIdleCore::take_output(WorkerFrame type, const json& frame) {
  switch (type) {
    case WorkerFrame::display:
    case WorkerFrame::update_display:
      return kernel_.on_output(type, frame);
    case WorkerFrame::clear_output:
      return kernel_.on_clear_output(frame);
    case WorkerFrame::comm_open:
    case WorkerFrame::comm_msg:
    case WorkerFrame::comm_close:
      return kernel_.comms_.publish(std::string(worker_frame_name(type)), frame,
                                    &kernel_.cell_->request, *kernel_.cell_, kernel_.budget_);
    default:  // no other output comes so (request_kind.hpp's idle_output)
      return kernel_.frame_log_.log(
          "worker frame dropped", std::string(worker_frame_name(type)) + " sent between requests");
  }
}

OutputBudget& KernelIdleCore::running_budget() {
  return kernel_.budget_;
}

void KernelIdleCore::show_pipes() {
  kernel_.flush_streams(true);
}

void KernelWorkerDoor::fault(const std::string& why) {
  kernel_.fault_worker(why);
}

void Kernel::send_to_worker(const json& frame) {
  if (!worker_ || !frames_open_) return;
  if (!outbox_.queue(frame))
    return fault_worker("it left " + format_size(outbox_.size()) + " of frames unread");
  flush_outbox();
}

void Kernel::fault_worker(const std::string& why) {
  // Past a bound the worker is at fault: it goes (its exit restarts the session), and nothing
  // more is read from or sent to it in the meantime.
  frame_log_.log("worker fault", why + "; restarting the worker");
  audit_.record("worker_fault", {{"fault", why}});
  frames_open_ = false;
  frames_eof_at_.reset();
  outbox_.clear();
  debug_.close();
  if (worker_) worker_->kill();
}

void Kernel::flush_outbox() {
  // A worker that is gone drops the queue: its exit reports it.
  if (worker_ && frames_open_) outbox_.flush(worker_->frames_fd());
}

void Kernel::read_pipe(int index, size_t budget) {
  if (!worker_ || !pipe_open_[index]) return;
  int fd = index == 0 ? worker_->stdout_fd() : worker_->stderr_fd();
  char chunk[65536];
  size_t total = 0;
  while (total < budget) {
    // Never past the budget: before a frame, what lies beyond its cursor may follow it.
    ssize_t n = ::read(fd, chunk, std::min(sizeof chunk, budget - total));
    if (n > 0) {
      total += static_cast<size_t>(n);
      cursors_.read(index, static_cast<uint64_t>(n));
      streams_[index].append(std::string_view(chunk, static_cast<size_t>(n)), output_budget());
      if (streams_[index].due(Clock::now())) flush_streams(false);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) pipe_open_[index] = false;
    break;
  }
  if (total > 0 && !worker_runs_code()) idle_.tell_withheld();
}

void Kernel::drain_pipes() {
  read_pipe(0, kDrainBudget);
  read_pipe(1, kDrainBudget);
}

void Kernel::read_output_before(const json& frame) {
  // That much is read and shown before the frame, and no more, so text printed just after it
  // (the next line of a clear_output loop) waits for the next turn; text read before the frame,
  // bytes written around the streams included, is always shown before it (worker_channel.hpp).
  auto due = cursors_.due_before(frame, kDrainBudget);
  for (int i = 0; i < 2; ++i)
    if (due[i] > 0) read_pipe(i, static_cast<size_t>(due[i]));
  flush_streams(true);
}

void Kernel::learn_uncounted_output(const json& done) {
  cursors_.learn_at_done(done);
}

void Kernel::flush_streams(bool final) {
  const WireMessage* parent = background_parent();
  for (int i = 0; i < 2; ++i) {
    if (!streams_[i].pending()) continue;
    auto now = Clock::now();
    size_t cut =
        redactor_.cut_after_secrets(streams_[i].pending_text(), streams_[i].ready(final, now));
    std::string text = redactor_.redact(streams_[i].take_prefix(cut, now));
    if (!text.empty()) client_.publish("stream", create_stream(kStreamNames[i], text), parent);
  }
}

void Kernel::read_frames() {
  if (!worker_ || !frames_open_) return;
  // fd 3's frames to handle_frame, the pipes' text before each (frame_reader.hpp).
  class Sink final : public FrameSink {
   public:
    explicit Sink(Kernel& kernel) : kernel_(kernel) {}
    bool worker_present() const override { return kernel_.worker_.has_value(); }
    void read_output_before(const json& frame) override { kernel_.read_output_before(frame); }
    void handle(const json& frame) override { kernel_.handle_frame(frame); }
    void fault(const std::string& why) override { kernel_.fault_worker(why); }

   private:
    Kernel& kernel_;
  } sink(*this);
  if (!belljar::read_frames(worker_->frames_fd(), decoder_, frames_open_, sink)) {
    // EOF, handled once: a half-closed socket stays readable forever, so it is no longer
    // polled. A worker that is ending exits now (its exit says why); one that closed its
    // end and kept running is at fault once the grace period is over.
    frames_open_ = false;
    frames_eof_at_ = Clock::now() + kFramesEofGrace;
  }
}

void Kernel::handle_frame(const json& frame) {
  const std::string& name = frame["type"].get_ref<const std::string&>();  // checked by next()
  std::optional<WorkerFrame> type = worker_frame(name);
  if (!type) return frame_log_.log("worker sent an unknown frame type", name.substr(0, 64));
  if (*type == WorkerFrame::hello) return on_hello(frame);
  if (*type == WorkerFrame::comm_begin) return comms_.on_begin(frame, executing());
  if (debug_channel_frame(*type))
    return frame_log_.log("worker frame dropped",
                          name + " on fd 3: it belongs on the debug channel");
  // Output that names its request (a task's, a thread's): shown under it, whenever it comes.
  if (frame.contains("parent") && names_a_parent(*type))
    return idle_.on_parented_output(*type, frame);
  if (json_field(frame, "idle", false)) return idle_.on_idle_frame(*type, frame);
  if (!answers_current_request(frame)) {
    // The handler of a comm message handed during the cell, once the worker said it began.
    if (executing() && comms_.handler_runs(json_field(frame, "id", "")))
      return comms_.on_handler_frame(*type, frame, *cell_, budget_, requests_started_);
    // Frames carry the id of the request they answer: a stale one (a delayed `done` after a
    // forged one, a thread's display after its cell ended) never lands in a later request.
    return frame_log_.log("worker frame dropped",
                          name + " for a request that is not the current one");
  }
  switch (*type) {
    case WorkerFrame::hello:
    case WorkerFrame::comm_begin:
    case WorkerFrame::debug_reply:
    case WorkerFrame::debug_event:
    case WorkerFrame::debug_state:
      return;  // above
    case WorkerFrame::display:
    case WorkerFrame::update_display:
    case WorkerFrame::result:
      return on_output(*type, frame);
    case WorkerFrame::clear_output:
      return on_clear_output(frame);
    case WorkerFrame::stream:  // only ever sent naming a parent (on_parented_output)
      return frame_log_.log("worker frame dropped", "a stream frame that names no request");
    case WorkerFrame::error:
      return on_error(frame);
    case WorkerFrame::input_request:
      return on_input_request(frame);
    case WorkerFrame::limits:
      if (executing()) return send_to_worker(limits_.ask(*cell_, &*worker_, frame, budget_));
      if (running_code())
        send_to_worker(
            {{"type", "limits_reply"}, {"ok", false}, {"error", "%%limits applies to cells"}});
      return;
    case WorkerFrame::audit_request:
      return on_audit_request(frame);
    case WorkerFrame::comm_open:
    case WorkerFrame::comm_msg:
    case WorkerFrame::comm_close:
      if (running_code()) comms_.publish(name, frame, &cell_->request, *cell_, budget_);
      return;
    case WorkerFrame::done:
      return on_done(frame);
    case WorkerFrame::complete_reply:
    case WorkerFrame::inspect_reply:
    case WorkerFrame::is_complete_reply:
    case WorkerFrame::comm_info_reply:
      if (worker_answer(cell_->kind) == *type) finish_request_reply(frame);
      return;
  }
}

void Kernel::on_hello(const json& frame) {
  if (worker_ready_) return frame_log_.log("worker frame dropped", "a second hello");
  // Built by the supervisor: the frontend loads codemirror_mode as a script path.
  auto info = frame.find("language_info");
  language_info_ = language_info_from_worker(info != frame.end() ? *info : json::object());
  // Whether the sandbox's Python can debug (debugpy found): without it nothing is ever written
  // to fd 4, and every debug_request is answered by the supervisor.
  debug_.hello(json_field(frame, "debugger", false));
  worker_ready_ = true;
  limits_.worker_ready(worker_->cpu_seconds());
  start_error_.clear();
  debug_.readiness(worker_ready_, start_error_);
  failed_starts_ = 0;
  dispatch_next();
  for (auto& held : debug_.take_held()) submit_control(held);
}

// A comm handler's displays are its request's output, as a cell's are (ipywidgets' Output and
// interact route them by that parent).
const WireMessage* Kernel::output_parent() const {
  return running_code() ? &cell_->request : nullptr;
}

OutputBudget& Kernel::output_budget() {
  if (worker_runs_code()) return budget_;
  return idle_.budget(Clock::now());
}

void Kernel::on_output(WorkerFrame type, const json& frame) {
  bool executing = this->executing();
  if (!running_code() || (type == WorkerFrame::result && !executing))
    return;  // nothing to attribute
  std::optional<json> shown = checks_.display(type, frame, budget_);
  if (!shown) return;
  json& data = (*shown)["data"];
  json& metadata = (*shown)["metadata"];
  if (executing && cell_->displays.size() < kDisplaysAudited) {
    json mimes = json::array();
    for (auto& [mime, value] : data.items()) mimes.push_back(mime);
    cell_->displays.push_back(mimes);
  }
  if (type == WorkerFrame::result) {
    if (cell_->silent) return;
    cell_->result_text = json_field(data, "text/plain", cell_->result_text);
    client_.publish(
        "execute_result",
        {{"execution_count", cell_->execution_count}, {"data", data}, {"metadata", metadata}},
        output_parent());
  } else {
    client_.publish(type == WorkerFrame::display ? "display_data" : "update_display_data",
                    std::move(*shown), output_parent());
  }
}

void Kernel::on_clear_output(const json& frame) {
  if (!running_code()) return;
  // A flood of them is output too: charged.
  OutputPublisher(client_, checks_, frame_log_).clear_output(frame, budget_, output_parent());
}

void Kernel::on_error(const json& frame) {
  if (!executing()) return;
  // An error shown and caught (IPython's showtraceback: %run, a display's failing repr) is
  // output only, and the cell goes on; anything but an explicit false ends the cell.
  bool fails_cell = json_field(frame, "fails_cell", true);
  // Once the cap is spent, a further error is not published (the reply still carries the
  // last one); the first error of a cell is always shown, cut to what the budget allows.
  bool publish_it = fails_cell ? !cell_->error || !budget_.exhausted() : !budget_.exhausted();
  json error = create_error_content("", "", json::array());
  for (const char* key : {"ename", "evalue", "traceback"})
    if (auto it = frame.find(key); it != frame.end()) error[key] = *it;
  redactor_.redact_json(error);
  error = charge_error(std::move(error), budget_);
  std::string ename = error["ename"], evalue = error["evalue"];
  json traceback = std::move(error["traceback"]);
  if (!fails_cell) {
    if (!cell_->silent && publish_it)
      client_.publish("error", create_error_content(ename, evalue, traceback), output_parent());
    return;
  }
  limits_.name_limit_in_error(*cell_, ename, evalue, traceback);
  cell_->error = create_error_content(ename, evalue, traceback);
  if (!cell_->silent && publish_it) client_.publish("error", *cell_->error, output_parent());
}

void Kernel::on_input_request(const json& frame) {
  if (!executing()) {
    // A comm handler has no prompt to show: refused, so it never waits for an answer.
    if (running_code())
      send_to_worker({{"type", "input_reply"}, {"error", "input() is only answered in a cell"}});
    return;
  }
  json content = {
      {"prompt", charge_text(redactor_.redact(json_field(frame, "prompt", "")), budget_)},
      {"password", json_field(frame, "password", false)}};
  if (!cell_->allow_stdin) {
    send_to_worker(
        {{"type", "input_reply"}, {"error", "this frontend does not support input requests"}});
    return;
  }
  // Each request is a message to the client: a loop of them is output like any other.
  if (!budget_.take_whole(kInputRequestCost)) {
    send_to_worker({{"type", "input_reply"}, {"error", "the cell's output limit was reached"}});
    return;
  }
  client_.frontend()->request_input(cell_->request, content);
}

void Kernel::on_audit_request(const json& frame) {
  // The learner's own cells, as the supervisor recorded them (the worker can't forge them).
  if (!executing()) {
    if (running_code()) send_to_worker({{"type", "audit_reply"}, {"records", json::array()}});
    return;
  }
  size_t last = std::min(json_field<size_t>(frame, "last", 10), recent_cells_.size());
  json records = json::array();
  for (size_t i = recent_cells_.size() - last; i < recent_cells_.size(); ++i)
    records.push_back(json::parse(recent_cells_[i], nullptr, false));  // our own dump_json
  json reply = {{"type", "audit_reply"}, {"records", records}};
  if (audit_.failures() > 0) reply["log_error"] = audit_.failure_text();
  send_to_worker(reply);
}

void Kernel::on_done(const json& frame) {
  // The proxy's decisions for this cell's requests were posted before their responses ended,
  // so before this done was written; but read_frames may have read it past the poll that saw
  // them. Take them now, or the cell's record and reply would miss its last requests.
  handle_egress();
  // One or the other: finish_cell starts the next request, which this done is not for.
  if (executing())
    finish_cell(frame);
  else if (cell_->kind == RequestKind::comm)
    finish_request_reply(frame);  // a comm handler's done
}

bool Kernel::answers_current_request(const json& frame) const {
  return cell_ && !cell_->id.empty() && json_field(frame, "id", "") == cell_->id;
}

void Kernel::on_worker_exit(const WorkerExit& exit) {
  drain_pipes();
  flush_streams(true);
  std::string cause = exit.describe();
  audit_.record(
      "worker_exit",
      {{"cause", cause}, {"memory_limit", exit.memory_limit}, {"during_cell", cell_.has_value()}});
  bool was_ready = worker_ready_;
  queue_.push_shell_first(comms_.take_back());  // before a fresh worker could be given them twice
  debug_.end_session("the session restarted");
  worker_.reset();
  debug_.worker_gone();
  worker_ready_ = false;
  debug_.readiness(worker_ready_, start_error_);
  ++restarts_;
  metrics_.restart();
  if (shutting_down_) return;
  if (was_ready) {
    failed_starts_ = 0;
    start_worker();
  } else {
    start_error_ = "the Python worker exited before it was ready (" + cause + ")";
    debug_.readiness(worker_ready_, start_error_);
    schedule_restart(start_error_);
    dispatch_next();  // fails queued cells with the reason
    for (auto& held : debug_.take_held()) submit_control(held);
  }
  if (cell_) {
    CellLimits::Failure failure = limits_.after_exit(*cell_, exit, cause);
    fail_cell(failure.ename, failure.evalue, failure.status);
  }
}

void Kernel::restart_worker(const std::string& why) {
  // Output already in the pipes belongs to the old session: deliver it before it goes.
  drain_pipes();
  flush_streams(true);
  audit_.record("worker_restart", {{"reason", why}, {"during_cell", cell_.has_value()}});
  drop_worker();
  queue_.push_shell_first(comms_.take_back());
  debug_.end_session("the session restarted");
  worker_ready_ = false;
  debug_.readiness(worker_ready_, start_error_);
  restart_at_.reset();
  ++restarts_;  // a start failure from here on is retried, not a refusal to start
  metrics_.restart();
  if (cell_)
    fail_cell("WorkerDied",
              "the session was reset (" + why +
                  "): variables were lost, "
                  "workspace files were kept",
              CellStatus::crashed);
  if (shutting_down_) return;
  failed_starts_ = 0;
  start_worker();
}

void Kernel::drop_worker() {
  if (!worker_) return;
  worker_->kill();
  worker_.reset();
  debug_.worker_gone();
}

}  // namespace belljar
