#pragma once
// The router's sessions as processes: each is `belljar mcp [policy flags] --one-session ID`,
// started from this very binary (/proc/self/exe), its stdin and stdout pipes of the router's,
// its stderr the router's own (logs, and the audit log when it goes there). Lines go in and come
// out; writes are queued and never block (a session busy writing to a slow client must not
// stop the router from reading the others). A session has ended once its process was reaped
// and its output read to the end, so its last answers are never lost.
#include <poll.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernel/mcp/json_lines.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

// A session's line may carry a whole file (read_file: 64 MiB of base64 and its JSON).
inline constexpr size_t kMaxSessionLine = 96u << 20;

class SessionProcesses {
 public:
  using Key = uint64_t;
  // `args`: what follows `belljar` for every session (mcp and the policy flags as given).
  explicit SessionProcesses(std::vector<std::string> args);
  ~SessionProcesses();  // SIGKILL to any still running, reaped
  SessionProcesses(const SessionProcesses&) = delete;
  SessionProcesses& operator=(const SessionProcesses&) = delete;

  // Started with `extra` (later flags win) and --one-session `kernel_id`; false with `why` when
  // it could not be.
  bool start(Key key, const std::string& kernel_id, const std::vector<std::string>& extra,
             std::string* why);
  void send(Key key, std::string line);  // a line, without its newline
  // Its input closes once what is queued is written: it ends when its calls are answered.
  void close_input(Key key);
  // SIGTERM: the session's kernel stops its sandbox and exits.
  void terminate(Key key);
  void terminate_all();

  // `read_output` false: their output is left in their pipes (the client reads too slowly, and
  // a session blocked on a full pipe waits for it: backpressure, not memory).
  void add_poll_items(std::vector<pollfd>& items, bool read_output = true);
  struct Events {
    std::vector<std::pair<Key, std::string>> lines;
    std::vector<std::pair<Key, std::string>> ended;  // how: "exit status 0", "signal 9"
  };
  // After poll: the items add_poll_items added, from `first` on. Also reaps (a SIGCHLD's work).
  Events handle(const std::vector<pollfd>& items, size_t first);
  Events reap();
  bool empty() const { return children_.empty(); }
  // The exit status of the last session that ended by exiting (for the router's own).
  int last_exit_status() const { return last_exit_status_; }

 private:
  struct Child {
    pid_t pid = -1;
    Fd input, output;
    std::string outbox;
    JsonLines lines{kMaxSessionLine};
    bool close_after_outbox = false;
    std::optional<std::string> exited;
  };
  void write_some(Child& child);
  void read_some(Key key, Child& child, Events& events);
  void finish_if_done(Key key, Events& events);

  std::vector<std::string> args_;
  std::map<Key, Child> children_;
  std::vector<std::pair<Key, bool>> polled_;  // each item add_poll_items added: key, output?
  int last_exit_status_ = 0;
};

}  // namespace belljar
