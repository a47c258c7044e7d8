#pragma once
// The Jupyter channels' public doors. Each listening socket a client reaches is the gate's; the
// gate passes each connection's bytes on, both ways, to the ZMQ socket behind it (a unix socket
// in a private directory that only this process may connect to, ZMQ_IPC_FILTER_PID), and reads
// what the peer sends with a ZmtpMeter (zmtp_meter.hpp) on the way.
// The threat: any peer that reaches the ports talks before it is authenticated. libzmq buffers a
// message whole before the kernel can check its signature, and keeps every connection it is
// handed for as long as the peer likes: unbounded, a peer that opens connections and idles, or
// that holds unfinished messages on many of them, shuts every real client out. So the gate
// admits only what the doors' rules (kDoorRules, GateLimits) allow, and closes the rest:
//   - a handshake (greeting and READY) within `handshake`;
//   - on the doors where clients sign (shell, control, stdin), a connection that has not
//     authenticated is closed once it has sent no message for `unauthenticated` (from its
//     connect, or its last message: what is on its way is judged first), and at once when the
//     front door refuses a message it sent (refused()). It authenticates when the front door
//     accepts a message from it (authenticated(): signature and replay guard passed), or when it
//     declares the identity of a connection that did (jupyter_client and Jupyter Server give a
//     client's shell, control, stdin and iopub one identity). A peer that declares none is given
//     one of the gate's, so the front door's word names exactly one connection;
//   - iopub and heartbeat carry no signed message: they are bounded by the caps alone;
//   - unauthenticated connections at most `per_address` per door from one source address, and
//     `max_connections` in all: a new connection past either closes the oldest unauthenticated
//     one of its door and address (the address holding most, for the total), so idle peers
//     never shut a new client out; an authenticated connection is never closed for a cap;
//   - the frame header that takes one message past its limit is refused before libzmq reads
//     it, and what all peers hold unfinished together is bounded (`budget`): past it, the
//     unauthenticated connection holding the most is closed, an authenticated one only when no
//     unauthenticated one holds anything.
// Each refusal is said (take_refusals), for the front door's rate-limited log.
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernel/protocol/zmtp_meter.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

// What each door's connections may prove, by channel name: the doors' rules, one row each.
struct DoorRule {
  const char* channel;
  bool signs;   // the client sends signed messages here: it authenticates, or it goes
  bool routes;  // a ROUTER: one connection per identity, and the gate names those without one
  bool links;   // shares the identity of the client's authenticated connection
};
inline constexpr DoorRule kDoorRules[] = {
    {"shell", true, true, true},       {"control", true, true, true}, {"stdin", true, true, true},
    {"iopub", false, false, true},      // a SUB sends SUBSCRIBE, never a message
    {"heartbeat", false, true, false},  // pings are bytes, unsigned
};

struct GateLimits {
  ZmtpLimits message;
  uint64_t budget;         // declared bytes of unfinished messages, all peers together
  size_t max_connections;  // all doors together
  size_t per_address;      // unauthenticated connections of one source address, per door
  std::chrono::milliseconds handshake;        // accept to READY
  std::chrono::milliseconds unauthenticated;  // accept to a signed message, where clients sign
};

class ZmtpGate {
 public:
  explicit ZmtpGate(GateLimits limits);
  ~ZmtpGate();  // stops the thread, closes every connection
  ZmtpGate(const ZmtpGate&) = delete;
  ZmtpGate& operator=(const ZmtpGate&) = delete;

  // Before start(): a listening socket, and the unix socket its connections are passed to;
  // `channel` names its row of kDoorRules.
  void add_door(Fd listener, std::string inner_path, std::string channel);
  void start();
  // The front door accepted a message that `channel`'s ZMQ socket received from `identity`.
  void authenticated(const std::string& channel, std::string identity);
  // The front door refused such a message: its connection goes, unless it had authenticated.
  void refused(const std::string& channel, std::string identity);
  // "<channel>: <why>" for each connection refused since the last call.
  std::vector<std::string> take_refusals();
  // Whether a disconnect on `channel` is one the gate closed quietly, or one its peer made by
  // itself (counted off once): the front door logs every other disconnect (the gate's refusals).
  bool take_quiet_close(const std::string& channel);

 private:
  using Clock = std::chrono::steady_clock;
  struct Door {
    Fd listener;
    std::string inner_path;
    std::string channel;
    DoorRule rule;
    // An idle unauthenticated connection's close is said once a door: jupyter_client's
    // KernelManager holds a control connection that sends nothing until shutdown, and it
    // reconnects every bound, which is housekeeping, not news for the log.
    bool idle_close_said = false;
  };
  struct Passage;  // one client connection and its connection to the ZMQ socket
  void run();
  void accept_all(size_t door);
  bool make_room(size_t door, const std::string& address);
  void move(Passage& p);
  bool finish_handshake(Passage& p, std::string& bytes);
  void take_news();
  void mark_authenticated(Passage& p);
  int enforce_deadlines();  // closes the late; milliseconds to the next deadline, or -1
  void record_refusal(size_t door, const std::string& why);  // for take_refusals
  void refuse(Passage& p, const std::string& why);
  void close_quietly(Passage& p);  // closed, with nothing for the log
  void note_quiet_close(size_t door);
  void enforce_budget();
  void watch(Passage& p);
  void close(uint64_t id);

  GateLimits limits_;
  std::vector<Door> doors_;
  Fd epoll_, wake_, news_;
  std::map<uint64_t, Passage> passages_;
  std::vector<uint64_t> closing_;
  uint64_t next_id_ = 1;
  std::mutex mutex_;  // refusals_ and authenticated_, shared with the front door's thread
  std::vector<std::string> refusals_;
  std::map<std::string, int> quiet_closes_;  // by channel, under mutex_
  struct Word {                              // the front door's, on one message
    std::string channel, identity;
    bool accepted;
  };
  void tell(Word word);
  std::vector<Word> news_from_front_;
  std::thread thread_;
};

}  // namespace belljar
