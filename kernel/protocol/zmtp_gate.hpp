#pragma once
// The Jupyter channels' public doors. Each listening socket a client reaches is the gate's; the
// gate passes each connection's bytes on, both ways, to the ZMQ socket behind it (a unix socket
// in a private directory that only this process may connect to, ZMQ_IPC_FILTER_PID), and reads
// what the peer sends with a ZmtpMeter (zmtp_meter.hpp) on the way.
// The threat: any peer that reaches the ports talks before it is authenticated, and libzmq
// buffers a message whole before the kernel can check its signature. The gate refuses, before
// libzmq sees it, the frame header that would take one message past its limit, and it bounds
// what all peers together may hold unfinished (`budget`): past it, the connection holding the
// most is closed. Connections past `max_connections` are closed as they come. Each refusal is
// said (take_refusals), for the front door's rate-limited log.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernel/protocol/zmtp_meter.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

struct GateLimits {
  ZmtpLimits message;
  uint64_t budget;         // declared bytes of unfinished messages, all peers together
  size_t max_connections;  // all doors together
};

class ZmtpGate {
 public:
  explicit ZmtpGate(GateLimits limits);
  ~ZmtpGate();  // stops the thread, closes every connection
  ZmtpGate(const ZmtpGate&) = delete;
  ZmtpGate& operator=(const ZmtpGate&) = delete;

  // Before start(): a listening socket, and the unix socket its connections are passed to.
  void add_door(Fd listener, std::string inner_path, std::string channel);
  void start();
  // "<channel>: <why>" for each connection refused since the last call.
  std::vector<std::string> take_refusals();

 private:
  struct Door {
    Fd listener;
    std::string inner_path;
    std::string channel;
  };
  struct Passage;  // one client connection and its connection to the ZMQ socket
  void run();
  void accept_all(size_t door);
  void move(Passage& p);
  void record_refusal(size_t door, const std::string& why);  // for take_refusals
  void refuse(Passage& p, const std::string& why);
  void enforce_budget();
  void watch(Passage& p);
  void close(uint64_t id);

  GateLimits limits_;
  std::vector<Door> doors_;
  Fd epoll_, wake_;
  std::map<uint64_t, Passage> passages_;
  std::vector<uint64_t> closing_;
  uint64_t next_id_ = 1;
  std::mutex refusals_mutex_;
  std::vector<std::string> refusals_;
  std::thread thread_;
};

}  // namespace belljar
