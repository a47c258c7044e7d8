#include "kernel/session/client_channel.hpp"

#include "kernel/protocol/replies.hpp"

namespace belljar {

void ClientChannel::publish(const std::string& type, nlohmann::json content,
                            const WireMessage* parent) {
  frontend_->publish(type, std::move(content), parent);
}

void ClientChannel::publish_comm(const std::string& type, nlohmann::json content,
                                 nlohmann::json metadata, const WireMessage* parent,
                                 std::vector<std::string> buffers) {
  frontend_->publish_comm(type, std::move(content), std::move(metadata), parent,
                          std::move(buffers));
}

void ClientChannel::reply(Channel channel, const WireMessage& parent, const std::string& type,
                          nlohmann::json content, nlohmann::json metadata) {
  frontend_->reply(channel, parent, type, std::move(content), std::move(metadata));
}

void ClientChannel::status(const std::string& state, const WireMessage* parent) {
  publish("status", create_status(state), parent);
  if (state == "idle") trim_at_ = Clock::now() + kTrimWhenIdleFor;
}

bool ClientChannel::take_trim(Clock::time_point now) {
  if (!trim_at_ || now < *trim_at_) return false;
  trim_at_.reset();
  return true;
}

}  // namespace belljar
