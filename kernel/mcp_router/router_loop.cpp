#include "kernel/mcp_router/router_loop.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kernel/mcp_router/session_processes.hpp"
#include "kernel/observability/audit_log.hpp"
#include "kernel/protocol/wire_message.hpp"

namespace belljar {

namespace {

using Clock = SessionRouter::Clock;

class RouterLoop {
 public:
  RouterLoop(const RouterOptions& options, ClientSide& clients)
      : limits_(options.limits),
        folders_(options.folders),
        router_(options.limits, new_uuid),
        processes_(options.session_args),
        clients_(clients),
        audit_(open_audit_destination(options.policy, router_id_,
                                      [](const char* name) { return std::getenv(name); })) {
    audit_.set_kernel(router_id_);
  }
  RouterLoop(const RouterLoop&) = delete;
  RouterLoop& operator=(const RouterLoop&) = delete;

  int run(const nlohmann::json& start_fields);

 private:
  void apply();
  void take_signal();

  std::string router_id_ = new_uuid();
  RouterLimits limits_;
  std::optional<SessionFolders> folders_;
  SessionRouter router_;
  SessionProcesses processes_;
  ClientSide& clients_;
  AuditLog audit_;
  Fd signals_;
};

int RouterLoop::run(const nlohmann::json& start_fields) {
  sigset_t watched;
  sigemptyset(&watched);
  for (int signal : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&watched, signal);
  ::sigprocmask(SIG_BLOCK, &watched, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client gone is seen as EPIPE
  signals_ = Fd(::signalfd(-1, &watched, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals_) throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
  nlohmann::json fields = start_fields;
  fields["max_sessions"] = limits_.max_sessions;
  fields["idle_timeout_seconds"] = limits_.idle_timeout.count() / 1000.0;
  audit_.record("mcp_router_start", std::move(fields));
  clients_.open(router_);
  apply();
  while (!router_.done() || clients_.has_output()) {
    std::vector<pollfd> items = {{signals_.get(), POLLIN, 0}};
    size_t clients_index = items.size();
    clients_.add_poll_items(items);
    size_t sessions_index = items.size();
    processes_.add_poll_items(items, !clients_.backlogged());
    int timeout = -1;
    if (auto due = router_.next_due()) {
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(*due - Clock::now()).count();
      timeout = static_cast<int>(std::clamp<long long>(wait, 0, 60000));
    }
    if (::poll(items.data(), items.size(), timeout) < 0 && errno != EINTR)
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (items[0].revents) take_signal();
    auto now = Clock::now();
    clients_.handle(items, clients_index, router_, now);
    auto events = processes_.handle(items, sessions_index);
    now = Clock::now();
    for (auto& [key, line] : events.lines) router_.from_session(key, line, now);
    for (auto& [key, how] : events.ended) router_.session_ended(key, how, now);
    router_.on_timers(now);
    apply();
    if (router_.first_failed_to_start()) {
      int status = processes_.last_exit_status();
      return status != 0 ? status : 1;
    }
  }
  audit_.record("mcp_router_stop", nlohmann::json::object());
  return 0;
}

void RouterLoop::apply() {
  // A session that cannot start is ended at once, and a client found gone stops its sessions,
  // either of which may leave more: until nothing is left.
  for (;;) {
    SessionRouter::Outbox out = router_.take();
    if (out.audit.empty() && out.start.empty() && out.to_sessions.empty() && out.stop.empty() &&
        out.to_client.empty() && out.ended_clients.empty() && out.dropped.empty())
      break;
    for (auto& [event, fields] : out.audit) audit_.record(event, std::move(fields));
    for (auto& start : out.start) {
      std::string why;
      std::vector<std::string> extra;
      if (folders_) {
        std::optional<std::filesystem::path> folder = folders_->make(start.kernel_id, &why);
        if (!folder) {
          router_.session_ended(start.key, "could not make its folder: " + why, Clock::now());
          continue;
        }
        extra = {"--workspace", folder->string()};
      }
      if (!processes_.start(start.key, start.kernel_id, extra, &why))
        router_.session_ended(start.key, "could not start: " + why, Clock::now());
    }
    for (auto& [key, line] : out.to_sessions) processes_.send(key, std::move(line));
    for (auto& stop : out.stop)
      stop.now ? processes_.terminate(stop.key) : processes_.close_input(stop.key);
    for (auto& [caller, line] : out.to_client) clients_.deliver(caller, std::move(line));
    for (auto& caller : out.dropped) clients_.call_dropped(caller);
    for (auto key : out.ended_clients) clients_.client_ended(key);
    clients_.flush(router_);
  }
}

void RouterLoop::take_signal() {
  signalfd_siginfo info{};
  while (::read(signals_.get(), &info, sizeof info) == sizeof info) {
    if (info.ssi_signo == SIGCHLD) continue;  // reaped after the poll
    // Stopped at once: each session's kernel ends its sandbox.
    clients_.stop();
    router_.shutdown(std::string("the router was stopped (") +
                     strsignal(static_cast<int>(info.ssi_signo)) + ")");
    processes_.terminate_all();
  }
}

}  // namespace

int serve_mcp_sessions(const RouterOptions& options, ClientSide& clients,
                       const nlohmann::json& start_fields) {
  RouterLoop loop(options, clients);
  return loop.run(start_fields);
}

}  // namespace belljar
