// The bounded queue of the egress proxy's decisions (egress_decision.hpp).
#include "sandbox/egress_api/egress_decision.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <utility>

#include "sandbox/os/setup_error.hpp"

namespace belljar {

std::string_view verdict_name(EgressVerdict verdict) {
  switch (verdict) {
    case EgressVerdict::allowed:
      return "allowed";
    case EgressVerdict::denied:
      return "denied";
    case EgressVerdict::failed:
      return "failed";
  }
  return "failed";
}

std::string_view failure_name(EgressFailure failure) {
  switch (failure) {
    case EgressFailure::none:
      return "";
    case EgressFailure::not_allowlisted:
      return "not-allowlisted";
    case EgressFailure::port_not_allowed:
      return "port-not-allowed";
    case EgressFailure::private_address:
      return "private-address";
    case EgressFailure::bad_request:
      return "bad-request";
    case EgressFailure::sni_mismatch:
      return "sni-mismatch";
    case EgressFailure::sni_missing:
      return "sni-missing";
    case EgressFailure::resolve_failed:
      return "resolve-failed";
    case EgressFailure::connect_failed:
      return "connect-failed";
    case EgressFailure::timeout:
      return "timeout";
    case EgressFailure::too_many_connections:
      return "too-many-connections";
    case EgressFailure::secret_needs_tls:
      return "secret-needs-tls";
    case EgressFailure::secret_unsupported:
      return "secret-unsupported-request";
    case EgressFailure::upstream_certificate:
      return "upstream-certificate";
    case EgressFailure::upstream_response:
      return "upstream-response";
    case EgressFailure::compressed_response:
      return "compressed-response";
    case EgressFailure::refusals_rate_limited:
      return "refusals-rate-limited";
  }
  return "";
}

EgressVerdict verdict_of(EgressFailure failure) {
  switch (failure) {
    case EgressFailure::none:
      return EgressVerdict::allowed;
    case EgressFailure::not_allowlisted:
    case EgressFailure::port_not_allowed:
    case EgressFailure::private_address:
    case EgressFailure::bad_request:
    case EgressFailure::sni_mismatch:
    case EgressFailure::sni_missing:
    case EgressFailure::secret_needs_tls:
    case EgressFailure::secret_unsupported:
    case EgressFailure::refusals_rate_limited:
      return EgressVerdict::denied;
    case EgressFailure::resolve_failed:
    case EgressFailure::connect_failed:
    case EgressFailure::timeout:
    case EgressFailure::too_many_connections:
    case EgressFailure::upstream_certificate:
    case EgressFailure::upstream_response:
    case EgressFailure::compressed_response:
      return EgressVerdict::failed;
  }
  return EgressVerdict::failed;
}

DecisionQueue::DecisionQueue(size_t max_queued) : max_queued_(max_queued) {
  event_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!event_) throw SetupError("egress proxy: eventfd: " + errno_text(errno));
}

void DecisionQueue::post(EgressDecision decision) {
  {
    std::lock_guard lock(mutex_);
    if (queued_.size() >= max_queued_) {
      ++dropped_;
    } else {
      queued_.push_back(std::move(decision));
    }
  }
  uint64_t one = 1;
  ssize_t ignored = ::write(event_.get(), &one, sizeof one);
  (void)ignored;
}

void DecisionQueue::count_unread() {
  std::lock_guard lock(mutex_);
  ++refused_unread_;
}

void DecisionQueue::flush_unread(Clock::time_point now) {
  {
    std::lock_guard lock(mutex_);
    if (refused_unread_ == 0 || unread_woken_ || now < next_unread_wake_) return;
    unread_woken_ = true;
    next_unread_wake_ = now + kUnreadWake;
  }
  uint64_t one = 1;
  ssize_t ignored = ::write(event_.get(), &one, sizeof one);
  (void)ignored;
}

int DecisionQueue::unread_flush_ms(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (refused_unread_ == 0 || unread_woken_) return -1;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(next_unread_wake_ - now).count();
  return static_cast<int>(std::max<long long>(ms, 0));
}

DecisionQueue::Taken DecisionQueue::take() {
  uint64_t count;
  ssize_t ignored = ::read(event_.get(), &count, sizeof count);
  (void)ignored;
  Taken out;
  std::lock_guard lock(mutex_);
  out.items.assign(std::make_move_iterator(queued_.begin()),
                   std::make_move_iterator(queued_.end()));
  queued_.clear();
  out.dropped = std::exchange(dropped_, 0);
  out.refused_unread = std::exchange(refused_unread_, 0);
  unread_woken_ = false;
  return out;
}

}  // namespace belljar
