// The client door on a front door, alone, on a fake frontend (our Frontend interface): what the
// parts publish and reply reaches the frontend as given, and an idle status schedules the heap's
// trim a moment later, taken once when due.
#include "kernel/session/client_channel.hpp"

#include <catch2/catch.hpp>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;
using json = nlohmann::json;

namespace {

class FakeFrontend final : public Frontend {
 public:
  void add_poll_items(std::vector<zmq::pollitem_t>&) override {}
  void handle(const zmq::pollitem_t*, Kernel&) override {}
  void collect_pending(Kernel&) override {}
  void reply(Channel channel, const WireMessage& parent, const std::string& type, json content,
             json) override {
    sent.push_back({type, std::move(content), parent.id(), channel});
  }
  void publish(const std::string& type, json content, const WireMessage* parent) override {
    sent.push_back({type, std::move(content), parent ? parent->id() : "", std::nullopt});
  }
  void request_input(const WireMessage&, json) override {}
  std::vector<Sent> sent;
};

}  // namespace

TEST_CASE("client channel: what the parts send reaches the frontend as given", "[client_channel]") {
  FakeFrontend frontend;
  ClientChannel client;
  client.attach(frontend);
  WireMessage cell = request("execute_request", "m1");
  client.publish("stream", {{"name", "stdout"}, {"text", "hi"}}, &cell);
  client.reply(Channel::shell, cell, "execute_reply", {{"status", "ok"}});
  client.publish_comm("comm_msg", {{"comm_id", "c"}}, json::object(), &cell, {});
  REQUIRE(frontend.sent.size() == 3);
  CHECK(frontend.sent[0].type == "stream");
  CHECK(frontend.sent[0].parent == "m1");
  CHECK(frontend.sent[1].channel == Channel::shell);
  CHECK(frontend.sent[2].type == "comm_msg");
}

TEST_CASE("client channel: idle schedules the heap's trim a moment later, taken once",
          "[client_channel]") {
  FakeFrontend frontend;
  ClientChannel client;
  client.attach(frontend);
  WireMessage cell = request("execute_request", "m1");
  client.status("busy", &cell);
  CHECK_FALSE(client.trim_due());
  client.status("idle", &cell);
  REQUIRE(client.trim_due());
  auto due = *client.trim_due();
  CHECK_FALSE(client.take_trim(due - std::chrono::milliseconds(1)));
  CHECK(client.take_trim(due));
  CHECK_FALSE(client.trim_due());
  CHECK(frontend.sent.size() == 2);
  CHECK(frontend.sent[1].content["execution_state"] == "idle");
}
