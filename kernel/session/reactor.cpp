// The reactor loop: one poll over the Jupyter sockets, the worker's frame socket and pipes,
// and the host's signalfd and launching client (host_signals.hpp); timers are the poll timeout.
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

#include "kernel/observability/host_files.hpp"
#include "kernel/protocol/replies.hpp"
#include "kernel/session/kernel.hpp"

namespace belljar {

namespace {
// The reactor thread's own CPU, seconds.
double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Bound secrets (--secret): each value read now, from this process's environment or its file
// (UsageError naming the binding: the kernel refuses to start), and the placeholders the sandbox
// holds instead put in the launch. The proxy makes the session's CA (the Kernel's constructor).
KernelOptions with_bound_secrets(KernelOptions options) {
  const Policy& policy = options.policy;
  if (policy.secrets.empty()) return options;
  if (policy.isolation == Isolation::none)
    throw UsageError(policy.secrets.front().flag_text() +
                     ": --isolation none runs the code with the kernel's own environment, value "
                     "included; a bound secret needs the sandbox");
  options.secrets = BoundSecrets::load(policy.secrets, environ);
  options.launch.secret_placeholders = options.secrets->placeholders();
  return options;
}

// --upstream-ca's files, read now (checked at start, refuse_untrusted_sources: a CA the sandbox
// could replace would decide whom the next session's secrets are sent to).
std::string upstream_ca_pem(const Policy& policy) {
  std::string pem;
  for (const auto& file : policy.upstream_ca) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    if (!in || !(text << in.rdbuf()))
      throw UsageError("--upstream-ca " + file.string() + ": cannot read the file");
    pem += text.str() + "\n";
  }
  return pem;
}

}  // namespace

Kernel::Kernel(KernelOptions options)
    : options_(with_bound_secrets(std::move(options))),
      obs_(options_.policy, options_.session_id),
      // With no sandbox the worker has the whole environment: redaction would promise nothing.
      checks_(options_.policy.isolation == Isolation::none
                  ? Redactor()
                  : Redactor::for_sandbox(
                        options_.policy, environ,
                        options_.secrets ? options_.secrets->values() : std::vector<std::string>{}),
              options_.policy.active_output) {
  // glibc raises its mmap threshold to the largest block freed (up to 32 MiB) and its trim
  // threshold to twice that, so after one cell with a 4 MB result the heap kept 11 MB of free
  // memory for the rest of the session. Set (to glibc's starting value) it stays fixed: blocks
  // that large are mapped on their own and unmapped when freed.
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  // Blocked before ZMQ starts its threads, so they inherit the mask and every signal of
  // interest arrives on the signalfd instead.
  sigset_t set = HostSignals::handled();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  // A file-size limit reached by the audit log or the metrics file is an EFBIG to handle
  // (audit_log.hpp), not the end of the kernel; children reset it (worker_process.cpp).
  ::signal(SIGXFSZ, SIG_IGN);
  host_.listen();
  // What the policy came from is read again by every restart: never where the sandbox can write.
  refuse_untrusted_sources(options_.policy);
  // The egress proxy runs on its own thread (all signals blocked there); with no allowlist, or
  // no sandbox, there is nothing for it to do, and its module (and OpenSSL) is never loaded.
  // With bound secrets it terminates their TLS with a CA the sandbox is given to trust.
  if (!options_.policy.allow_net.empty() && options_.policy.isolation != Isolation::none) {
    try {
      egress_.serve_with(start_egress(options_.egress_module,
                                      {options_.policy.allow_net, EgressLimits{}, options_.secrets,
                                       upstream_ca_pem(options_.policy)}));
    } catch (const std::exception& e) {
      throw SandboxError(e.what());  // the kernel refuses to start: no proxy, no way out
    }
    options_.launch.ca_bundle = egress_.ca_bundle_pem();
  }
}

Kernel::~Kernel() {
  drop_worker();
}

int Kernel::run(Frontend& frontend) {
  client_.attach(frontend);
  obs_.audit.set_kernel(options_.session_id);
  json start = {{"version", BELLJAR_VERSION},
                {"pid", ::getpid()},
                {"policy", options_.policy.summary()},
                {"notes", json::array()}};
  // The jail puts an empty .git placeholder where the workspace has none (workspace_watch.hpp);
  // it goes with the kernel if nothing was put in it.
  std::string git_dir = (options_.policy.workspace / ".git").string();
  struct stat st {};
  bool placeholder = ::lstat(git_dir.c_str(), &st) != 0 && errno == ENOENT;
  try {
    start_worker();  // throws SandboxError: refuse to start rather than run with less
  } catch (const SandboxError& e) {
    start["refused"] = e.what();
    obs_.audit.record("kernel_start", start);
    throw;
  }
  // Recorded once the sandbox stands: its notes say what this host could not enforce.
  start["notes"] = life_.notes();
  obs_.audit.record("kernel_start", start);
  obs_.metrics.flush(Clock::now(), true);
  frontend.serving();
  if (host_.take_client_gone(false)) request_shutdown();  // gone before it was watched
  client_.status("starting", nullptr);
  while (!shutting_down_) poll_once();
  drop_worker();
  handle_egress();
  egress_.record_summary(Clock::now(), true);
  if (placeholder) ::rmdir(git_dir.c_str());  // only ever removes an empty directory
  obs_.audit.record("shutdown",
                    {{"cells", current_.execution_count()}, {"worker_restarts", life_.restarts()}});
  obs_.metrics.flush(Clock::now(), true);
  return 0;
}

Clock::time_point Kernel::next_deadline() const {
  auto next = Clock::now() + std::chrono::seconds(1);
  if (auto due = worker_link_.next_deadline()) next = std::min(next, *due);
  if (current_.executing()) {
    if (current_.cell().kill_at) {
      next = std::min(next, *current_.cell().kill_at);
    } else {
      // CPU is sampled whatever the timeout: the cap, and whether a claimed pause is believed.
      next = std::min(next, limits_.timeout_deadline(current_.cell(), Clock::now()));
      next = std::min(next, Clock::now() + std::chrono::milliseconds(100));
    }
  }
  // The same condition as the sample in poll_once: code a cell left running is sampled on time.
  if (!current_.active() && worker_ && life_.ready())
    next = std::min(next, limits_.background_sample_due());
  if (auto due = debug_.next_deadline()) next = std::min(next, *due);
  if (auto due = life_.restart_due()) next = std::min(next, *due);
  if (auto trim = client_.trim_due()) next = std::min(next, *trim);
  if (worker_)
    if (auto survey = workspace_.next_due(*worker_)) next = std::min(next, *survey);
  if (auto due = obs_.metrics.due()) next = std::min(next, *due);
  if (auto due = egress_.summary_due()) next = std::min(next, *due);
  if (client_.frontend())
    if (auto wakeup = client_.frontend()->next_wakeup()) next = std::min(next, *wakeup);
  return next;
}

void Kernel::poll_once() {
  std::vector<zmq::pollitem_t> items = {{nullptr, host_.signal_fd(), ZMQ_POLLIN, 0}};
  client_.frontend()->add_poll_items(items);
  size_t worker_index = items.size();
  const bool worker_polled = worker_.has_value();  // its four items are in the poll
  if (worker_) {
    short events = ZMQ_POLLIN | (worker_link_.wants_to_write() ? ZMQ_POLLOUT : 0);
    items.push_back({nullptr, worker_link_.frames_fd_to_poll(), events, 0});
    items.push_back({nullptr, worker_link_.pipe_fd_to_poll(0), ZMQ_POLLIN, 0});
    items.push_back({nullptr, worker_link_.pipe_fd_to_poll(1), ZMQ_POLLIN, 0});
    short debug_events = ZMQ_POLLIN | (debug_.has_output() ? ZMQ_POLLOUT : 0);
    items.push_back({nullptr, debug_.poll_fd(), debug_events, 0});
  }
  size_t status_index = items.size();
  // The warden's reports: the broker's refusals whenever they come, survey replies.
  bool status_watched = worker_ && worker_->status_fd() >= 0;
  if (status_watched) items.push_back({nullptr, worker_->status_fd(), ZMQ_POLLIN, 0});
  size_t egress_index = items.size();
  if (egress_.running()) items.push_back({nullptr, egress_.decisions_fd(), ZMQ_POLLIN, 0});
  size_t parent_index = items.size();
  items.push_back({nullptr, host_.parent_fd(), ZMQ_POLLIN, 0});  // -1: not watched
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline() - Clock::now());
  long timeout_ms = std::max<long>(0, wait.count());
  // The reactor's work for the worker is the session's CPU (WorkerProcess::
  // charge_supervisor_cpu). An iteration only the worker's channels woke is charged whole (the
  // poll, reading and handling what they held, publishing it, the checks every wakeup makes); one
  // a client or a timer also woke, for the poll and the worker's part alone. A cell vmsplice()ing
  // pages into its stdout spent 6.7 s of the supervisor's CPU per 3 s of its own, charged to no
  // one. Timers alone (limits, surveys, metrics) are the kernel's, not charged.
  const double before_poll = worker_polled ? thread_cpu_seconds() : 0;
  try {
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(timeout_ms));
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
  }
  bool worker_woke = false, others_woke = false;
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].revents) {
      bool the_workers = worker_polled && i >= worker_index && i < worker_index + 4;
      (the_workers ? worker_woke : others_woke) = true;
    }
  // Woken by the worker and others alike: the poll and the worker's part, each clocked.
  const bool shared = worker_woke && others_woke;
  double for_the_worker = shared ? thread_cpu_seconds() - before_poll : 0;

  // Signals before the clients' messages, and whether or not the poll saw one: an interrupt
  // given before a request was read applies to the kernel as it was, as ipykernel's handler
  // does (an interrupt while idle is spent there, never on the cell a later request starts).
  HostSignals::Heard heard = host_.take_signals();
  for (int i = 0; i < heard.interrupts; ++i) interrupt_cell();
  if (heard.shutdown) request_shutdown();
  if (worker_)  // SIGCHLD, or an exit the poll did not wake for
    if (auto exit = worker_->poll_exit()) on_worker_exit(*exit);
  client_.frontend()->handle(&items[1], *this);
  if (host_.take_client_gone(items[parent_index].revents & ZMQ_POLLIN)) request_shutdown();
  // Before the worker's frames: a denial made during a cell is on record before its reply.
  if (egress_.running() && (items[egress_index].revents & ZMQ_POLLIN)) handle_egress();
  if (status_watched && worker_ && (items[status_index].revents & (ZMQ_POLLIN | ZMQ_POLLERR))) {
    take_workspace_reports();
  }
  if (worker_ && worker_polled) {
    const double start = shared ? thread_cpu_seconds() : 0;
    // The pipes before the frame socket: text already read when a frame arrives is shown
    // before it (the worker writes after a frame only once the frame was read, streams.py).
    if (items[worker_index + 1].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
      worker_link_.read_pipe(0, 1 << 20);
    if (items[worker_index + 2].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
      worker_link_.read_pipe(1, 1 << 20);
    if (worker_ && (items[worker_index].revents & ZMQ_POLLOUT)) worker_link_.flush_outbox();
    if (worker_ && (items[worker_index].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
      worker_link_.read_frames();
    // The debug channel after fd 3: each frame is placed in the text by its own `written`.
    if (worker_ && (items[worker_index + 3].revents & ZMQ_POLLOUT)) debug_.flush();
    if (worker_ && (items[worker_index + 3].revents & (ZMQ_POLLIN | ZMQ_POLLERR))) debug_.read();
    if (shared) for_the_worker += thread_cpu_seconds() - start;
  }

  auto now = Clock::now();
  if (current_.running_code() && worker_) limits_.check(current_.cell(), *worker_, now);
  debug_.check_deadlines(now);
  if (worker_) workspace_.schedule(*worker_, now);
  // Sampled while no request runs: code a cell left running is bounded by --cpu too.
  if (!current_.active() && worker_ && life_.ready() &&
      limits_.check_between_cells(*worker_, now, current_.execution_count(), idle_.last_cell()))
    restart_worker("background CPU past --cpu");
  worker_link_.on_timers(now);  // text due to be shown; a frame socket closed past its grace
  egress_.record_summary(now, false);
  obs_.metrics.flush(now);
  if (worker_woke && worker_)
    worker_->charge_supervisor_cpu(shared ? for_the_worker : thread_cpu_seconds() - before_poll);
  // The egress proxy's thread works for the sandbox alone: all of its CPU is the session's.
  if (worker_) worker_->charge_supervisor_cpu(egress_.take_cpu());
  if (life_.take_restart(now)) start_worker();  // the back-off after a failed start
  // Idle a moment: the free heap goes back to the system (malloc_trim), a request's buffers, a
  // large message's room, so a host's many idle kernels hold what they use, not what their
  // busiest moment needed.
  if (client_.take_trim(now) && !current_.executing()) ::malloc_trim(0);
}

void Kernel::handle_egress() {
  bool cell = current_.executing();
  egress_.take_decisions(Clock::now(), cell ? &current_.cell().egress : nullptr,
                         cell ? std::optional<int>(current_.cell().execution_count) : std::nullopt);
}

void Kernel::take_workspace_reports() {
  if (!worker_) return;
  workspace_.take_refusals(*worker_, current_.executing() ? &current_.cell() : nullptr);
  while (worker_) {
    auto step = workspace_.take_survey(*worker_, current_.executing() ? &current_.cell() : nullptr);
    if (!step) break;
    if (step->fail_held) fail_cell("WorkspaceGuardError", *step->fail_held, CellStatus::error);
    if (step->release) hand_to_worker(*step->release);
  }
}

}  // namespace belljar
