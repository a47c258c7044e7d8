#include "kernel/mcp_router/router_loop.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kernel/mcp/json_lines.hpp"
#include "kernel/mcp_router/session_processes.hpp"
#include "kernel/observability/audit_log.hpp"
#include "kernel/protocol/buffer_room.hpp"
#include "kernel/protocol/wire_message.hpp"

namespace belljar {

namespace {

using Clock = SessionRouter::Clock;

class RouterLoop {
 public:
  explicit RouterLoop(const RouterOptions& options)
      : limits_(options.limits),
        router_(options.limits, new_uuid),
        processes_(options.session_args),
        audit_(open_audit_destination(options.policy, router_id_,
                                      [](const char* name) { return std::getenv(name); })),
        lines_(kMaxMcpLine) {
    audit_.set_kernel(router_id_);
    out_flags_ = ::fcntl(STDOUT_FILENO, F_GETFL);
    if (out_flags_ != -1) ::fcntl(STDOUT_FILENO, F_SETFL, out_flags_ | O_NONBLOCK);
  }
  ~RouterLoop() {
    if (out_flags_ != -1) ::fcntl(STDOUT_FILENO, F_SETFL, out_flags_);
  }
  RouterLoop(const RouterLoop&) = delete;
  RouterLoop& operator=(const RouterLoop&) = delete;

  int run();

 private:
  void apply();
  void read_client();
  void write_client();
  void take_signal();

  std::string router_id_ = new_uuid();
  RouterLimits limits_;
  SessionRouter router_;
  SessionProcesses processes_;
  AuditLog audit_;
  JsonLines lines_;
  Fd signals_;
  int out_flags_ = -1;
  bool input_open_ = true, output_broken_ = false;
  std::string outbox_;
};

int RouterLoop::run() {
  sigset_t watched;
  sigemptyset(&watched);
  for (int signal : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&watched, signal);
  ::sigprocmask(SIG_BLOCK, &watched, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client gone is seen as EPIPE on stdout
  signals_ = Fd(::signalfd(-1, &watched, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals_) throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
  audit_.record("mcp_router_start",
                {{"max_sessions", limits_.max_sessions},
                 {"idle_timeout_seconds", limits_.idle_timeout.count() / 1000.0}});
  router_.start(Clock::now());
  apply();
  while (!router_.done() || (!outbox_.empty() && !output_broken_)) {
    std::vector<pollfd> items = {{signals_.get(), POLLIN, 0}};
    size_t input_index = items.size();
    if (input_open_) items.push_back({STDIN_FILENO, POLLIN, 0});
    size_t output_index = items.size();
    if (!outbox_.empty() && !output_broken_) items.push_back({STDOUT_FILENO, POLLOUT, 0});
    size_t sessions_index = items.size();
    processes_.add_poll_items(items);
    int timeout = -1;
    if (auto due = router_.next_due()) {
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(*due - Clock::now()).count();
      timeout = static_cast<int>(std::clamp<long long>(wait, 0, 60000));
    }
    if (::poll(items.data(), items.size(), timeout) < 0 && errno != EINTR)
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (items[0].revents) take_signal();
    if (input_open_ && items[input_index].revents) read_client();
    if (output_index < sessions_index && items[output_index].revents) write_client();
    auto events = processes_.handle(items, sessions_index);
    auto now = Clock::now();
    for (auto& [key, line] : events.lines) router_.from_session(key, line, now);
    for (auto& [key, how] : events.ended) router_.session_ended(key, how, now);
    router_.on_timers(now);
    apply();
    if (router_.default_failed_to_start()) {
      int status = processes_.last_exit_status();
      return status != 0 ? status : 1;
    }
  }
  audit_.record("mcp_router_stop", nlohmann::json::object());
  return 0;
}

void RouterLoop::apply() {
  // A session that cannot start is ended at once, which may leave answers: until none is left.
  for (;;) {
    SessionRouter::Outbox out = router_.take();
    if (out.audit.empty() && out.start.empty() && out.to_sessions.empty() && out.stop.empty() &&
        out.to_client.empty())
      break;
    for (auto& [event, fields] : out.audit) audit_.record(event, std::move(fields));
    for (auto& start : out.start) {
      std::string why;
      if (!processes_.start(start.key, start.kernel_id, &why))
        router_.session_ended(start.key, "could not start: " + why, Clock::now());
    }
    for (auto& [key, line] : out.to_sessions) processes_.send(key, std::move(line));
    for (auto& stop : out.stop)
      stop.now ? processes_.terminate(stop.key) : processes_.close_input(stop.key);
    for (auto& line : out.to_client) {
      if (output_broken_) break;
      outbox_ += line;
      outbox_ += '\n';
    }
  }
  if (!outbox_.empty()) write_client();
}

void RouterLoop::read_client() {
  std::string chunk(1u << 20, '\0');
  ssize_t n = ::read(STDIN_FILENO, chunk.data(), chunk.size());
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  auto now = Clock::now();
  if (n <= 0) {
    input_open_ = false;
    std::string last = lines_.finish();
    if (!last.empty()) router_.from_client(last, now);
    router_.client_closed("the client closed its input");
    return;
  }
  bool oversized = lines_.feed(std::string_view(chunk.data(), static_cast<size_t>(n)),
                               [&](std::string_view line) {
                                 if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
                                 if (line.find_first_not_of(" \t") == std::string_view::npos)
                                   return;
                                 router_.from_client(line, now);
                               });
  if (oversized) router_.client_message_too_long(lines_.max_line());
}

void RouterLoop::write_client() {
  while (!outbox_.empty()) {
    ssize_t n = ::write(STDOUT_FILENO, outbox_.data(), outbox_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // the client is gone: its sessions end
      output_broken_ = true;
      outbox_.clear();
      if (input_open_) {
        input_open_ = false;
        router_.client_closed("the client stopped reading");
      }
      return;
    }
    outbox_.erase(0, static_cast<size_t>(n));
  }
  give_back_room(outbox_);
}

void RouterLoop::take_signal() {
  signalfd_siginfo info{};
  while (::read(signals_.get(), &info, sizeof info) == sizeof info) {
    if (info.ssi_signo == SIGCHLD) continue;  // reaped after the poll
    // Stopped at once: each session's kernel ends its sandbox.
    if (input_open_) {
      input_open_ = false;
      router_.client_closed(std::string("the router was stopped (") +
                            strsignal(static_cast<int>(info.ssi_signo)) + ")");
    }
    processes_.terminate_all();
  }
}

}  // namespace

int serve_mcp_sessions(const RouterOptions& options) {
  RouterLoop loop(options);
  return loop.run();
}

}  // namespace belljar
