#pragma once
// The client door on a front door (frontend.hpp): what the Kernel's parts publish and reply goes
// through here to whichever frontend serves the session (Jupyter's sockets, MCP, the runner).
// It also keeps when the kernel last went idle: a host's many idle kernels give their free heap
// back a moment after (the core's reactor asks trim_due).
#include <chrono>
#include <optional>

#include "kernel/session/doors.hpp"
#include "kernel/session/frontend.hpp"

namespace belljar {

class ClientChannel final : public ClientDoor {
 public:
  using Clock = std::chrono::steady_clock;
  // Later than a client's next request in a burst.
  static constexpr auto kTrimWhenIdleFor = std::chrono::milliseconds(250);

  void attach(Frontend& frontend) { frontend_ = &frontend; }
  Frontend* frontend() const { return frontend_; }

  void publish(const std::string& type, nlohmann::json content, const WireMessage* parent) override;
  void publish_comm(const std::string& type, nlohmann::json content, nlohmann::json metadata,
                    const WireMessage* parent, std::vector<std::string> buffers) override;
  void reply(Channel channel, const WireMessage& parent, const std::string& type,
             nlohmann::json content, nlohmann::json metadata = nlohmann::json::object()) override;
  void status(const std::string& state, const WireMessage* parent) override;

  // When the heap is to be trimmed (set by an idle status); take_trim clears it once due.
  std::optional<Clock::time_point> trim_due() const { return trim_at_; }
  bool take_trim(Clock::time_point now);

 private:
  Frontend* frontend_ = nullptr;
  std::optional<Clock::time_point> trim_at_;
};

}  // namespace belljar
