#include "kernel/mcp_router/session_processes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace belljar {

namespace {

std::string how_it_ended(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Whether a read of `fd` would find something (data, or its end) now.
bool has_input(int fd) {
  pollfd item = {fd, POLLIN, 0};
  int n;
  while ((n = ::poll(&item, 1, 0)) < 0 && errno == EINTR) {
  }
  return n > 0 && (item.revents & (POLLIN | POLLHUP | POLLERR));
}

}  // namespace

SessionProcesses::SessionProcesses(std::vector<std::string> args) : args_(std::move(args)) {}

SessionProcesses::~SessionProcesses() {
  for (auto& [key, child] : children_) {
    if (child.exited || child.pid <= 0) continue;
    ::kill(child.pid, SIGKILL);
    int status = 0;
    while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

bool SessionProcesses::start(Key key, const std::string& kernel_id,
                             const std::vector<std::string>& extra, std::string* why) {
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0) {
    *why = std::string("pipe2: ") + std::strerror(errno);
    return false;
  }
  if (::pipe2(from_child, O_CLOEXEC) != 0) {
    *why = std::string("pipe2: ") + std::strerror(errno);
    ::close(to_child[0]), ::close(to_child[1]);
    return false;
  }
  Child child;
  child.input = Fd(to_child[1]);
  child.output = Fd(from_child[0]);
  Fd child_in(to_child[0]), child_out(from_child[1]);
  ::fcntl(child.input.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(child.output.get(), F_SETFL, O_NONBLOCK);

  std::vector<std::string> argv_text = {"belljar"};
  argv_text.insert(argv_text.end(), args_.begin(), args_.end());
  argv_text.insert(argv_text.end(), extra.begin(), extra.end());
  argv_text.push_back("--one-session");
  argv_text.push_back(kernel_id);
  std::vector<char*> argv;
  for (auto& arg : argv_text) argv.push_back(arg.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attributes);
  ::posix_spawn_file_actions_adddup2(&actions, child_in.get(), STDIN_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, child_out.get(), STDOUT_FILENO);
  // Nothing else of the router's: a descriptor some library opened without O_CLOEXEC (the
  // outside review: Asio's accepted HTTP connections) would live on in every session, and a
  // connection the server closed would stay open for its client.
  ::posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  // The router blocks the signals its signalfd reads: the session starts with none blocked and
  // each at its default, as a kernel started from a shell would.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int signal : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGPIPE}) sigaddset(&defaults, signal);
  ::posix_spawnattr_setsigmask(&attributes, &none);
  ::posix_spawnattr_setsigdefault(&attributes, &defaults);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int failed = ::posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attributes);
  if (failed != 0) {
    *why = std::string("posix_spawn(/proc/self/exe): ") + std::strerror(failed);
    return false;
  }
  child.pid = pid;
  children_.emplace(key, std::move(child));
  return true;
}

void SessionProcesses::send(Key key, std::string line) {
  auto it = children_.find(key);
  if (it == children_.end() || !it->second.input || it->second.close_after_outbox) return;
  it->second.outbox += line;
  it->second.outbox += '\n';
  write_some(it->second);
}

void SessionProcesses::close_input(Key key) {
  auto it = children_.find(key);
  if (it == children_.end()) return;
  it->second.close_after_outbox = true;
  if (it->second.outbox.empty()) it->second.input.reset();
}

void SessionProcesses::terminate(Key key) {
  auto it = children_.find(key);
  if (it == children_.end()) return;
  it->second.outbox.clear();
  it->second.close_after_outbox = true;
  it->second.input.reset();
  if (!it->second.exited) ::kill(it->second.pid, SIGTERM);
}

void SessionProcesses::terminate_all() {
  for (auto& [key, child] : children_) terminate(key);
}

void SessionProcesses::write_some(Child& child) {
  while (!child.outbox.empty() && child.input) {
    ssize_t n = ::write(child.input.get(), child.outbox.data(), child.outbox.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // EPIPE: it is ending; what it was sent is answered by session_ended
      child.outbox.clear();
      child.input.reset();
      return;
    }
    child.outbox.erase(0, static_cast<size_t>(n));
  }
  if (child.outbox.empty() && child.close_after_outbox) child.input.reset();
}

void SessionProcesses::add_poll_items(std::vector<pollfd>& items, bool read_output) {
  polled_.clear();
  for (auto& [key, child] : children_) {
    if (child.output && read_output) {
      items.push_back({child.output.get(), POLLIN, 0});
      polled_.emplace_back(key, true);
    }
    if (child.input && !child.outbox.empty()) {
      items.push_back({child.input.get(), POLLOUT, 0});
      polled_.emplace_back(key, false);
    }
  }
}

SessionProcesses::Events SessionProcesses::handle(const std::vector<pollfd>& items, size_t first) {
  Events events;
  for (size_t i = 0; i < polled_.size() && first + i < items.size(); ++i) {
    if (!items[first + i].revents) continue;
    auto [key, output] = polled_[i];
    auto it = children_.find(key);
    if (it == children_.end()) continue;
    if (output)
      read_some(key, it->second, events);
    else
      write_some(it->second);
    finish_if_done(key, events);
  }
  polled_.clear();
  Events reaped = reap();
  for (auto& ended : reaped.ended) events.ended.push_back(std::move(ended));
  return events;
}

void SessionProcesses::read_some(Key key, Child& child, Events& events) {
  char chunk[65536];
  ssize_t n = ::read(child.output.get(), chunk, sizeof chunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    child.output.reset();
    std::string last = child.lines.finish();
    if (!last.empty()) events.lines.emplace_back(key, std::move(last));
    return;
  }
  // An oversized line is dropped: our own process never writes one (kMaxSessionLine).
  child.lines.feed(std::string_view(chunk, static_cast<size_t>(n)),
                   [&](std::string_view line) { events.lines.emplace_back(key, line); });
}

SessionProcesses::Events SessionProcesses::reap() {
  Events events;
  for (auto& [key, child] : children_) {
    if (child.exited) continue;
    int status = 0;
    pid_t done = ::waitpid(child.pid, &status, WNOHANG);
    if (done != child.pid) continue;
    child.exited = how_it_ended(status);
    if (WIFEXITED(status)) last_exit_status_ = WEXITSTATUS(status);
    // All it wrote is in the pipe now. Read to the end of that, not to EOF: a process the
    // session started may hold the pipe open longer than the session lives.
    while (child.output && has_input(child.output.get())) read_some(key, child, events);
    if (child.output) {
      child.output.reset();
      std::string last = child.lines.finish();
      if (!last.empty()) events.lines.emplace_back(key, std::move(last));
    }
  }
  for (auto it = children_.begin(); it != children_.end();) {
    Key key = it->first;
    ++it;  // finish_if_done may erase the one before
    finish_if_done(key, events);
  }
  return events;
}

void SessionProcesses::finish_if_done(Key key, Events& events) {
  auto it = children_.find(key);
  if (it == children_.end() || !it->second.exited || it->second.output) return;
  events.ended.emplace_back(key, *it->second.exited);
  children_.erase(it);
}

}  // namespace belljar
