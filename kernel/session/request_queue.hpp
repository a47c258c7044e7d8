#pragma once
// The requests waiting for the worker, in the order they came: a part of the Kernel with one
// job, tested alone (tests/unit/kernel/session/request_queue.cpp). Shell requests are handed
// to the worker one at a time, as ipykernel does; a kernel_info_request that came before the
// worker said hello waits at the front. When a cell fails with stop_on_error, the execute
// requests queued behind it are taken out to be aborted, everything else keeps its place.
#include <deque>
#include <vector>

#include "kernel/protocol/wire_message.hpp"

namespace belljar {

struct QueuedRequest {
  Channel channel;
  WireMessage message;
};

class RequestQueue {
 public:
  void push_shell(WireMessage message) { queue_.push_back({Channel::shell, std::move(message)}); }
  // A control request answered once the worker says hello: before anything queued.
  void push_control_first(WireMessage message) {
    queue_.push_front({Channel::control, std::move(message)});
  }
  // Shell requests that were taken out of turn (the comm messages a cell left unhandled:
  // comms_during_cell.hpp) go back to the front, in their order, ahead of what came after them.
  void push_shell_first(std::deque<WireMessage> messages);
  bool empty() const { return queue_.empty(); }
  // A comm message waits here: one arriving now must not pass it.
  bool holds_comm() const;
  void clear() { queue_.clear(); }
  const QueuedRequest& front() const { return queue_.front(); }
  QueuedRequest take_front();
  // The execute requests on the shell channel, taken out in order (to be answered aborted).
  std::vector<WireMessage> take_executes();

  // While a failed cell's frontend gathers what it already sent (stop_on_error), submitted
  // requests queue without being dispatched.
  bool collecting() const { return collecting_; }
  void set_collecting(bool on) { collecting_ = on; }

 private:
  std::deque<QueuedRequest> queue_;
  bool collecting_ = false;
};

}  // namespace belljar
