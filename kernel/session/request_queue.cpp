#include "kernel/session/request_queue.hpp"

#include "kernel/session/request_kind.hpp"

namespace belljar {

QueuedRequest RequestQueue::take_front() {
  QueuedRequest request = std::move(queue_.front());
  queue_.pop_front();
  return request;
}

void RequestQueue::push_shell_first(std::deque<WireMessage> messages) {
  for (auto it = messages.rbegin(); it != messages.rend(); ++it)
    queue_.push_front({Channel::shell, std::move(*it)});
}

bool RequestQueue::holds_comm() const {
  for (const auto& request : queue_)
    if (request.channel == Channel::shell &&
        request_kind(request.message.type()) == RequestKind::comm)
      return true;
  return false;
}

std::vector<WireMessage> RequestQueue::take_executes() {
  std::vector<WireMessage> taken;
  std::deque<QueuedRequest> kept;
  for (auto& request : queue_) {
    if (request.channel == Channel::shell &&
        request_kind(request.message.type()) == RequestKind::execute)
      taken.push_back(std::move(request.message));
    else
      kept.push_back(std::move(request));
  }
  queue_ = std::move(kept);
  return taken;
}

}  // namespace belljar
