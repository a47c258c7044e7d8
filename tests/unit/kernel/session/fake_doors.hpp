#pragma once
// Fakes of the Kernel's doors (kernel/session/doors.hpp, the audit log's AuditRecords), for the
// links' unit tests: each keeps what it was given, in order, for the test to read. They are
// fakes of our own small interfaces; the links under test are the real ones.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernel/observability/audit_log.hpp"
#include "kernel/output/output_stream.hpp"
#include "kernel/session/doors.hpp"

namespace belljar::testing {

// A secret the session tests give their Redactor: what they check never reaches a client.
inline const std::string kSecret = "sk-live-0123456789abcdef";

struct Sent {
  std::string type;
  nlohmann::json content;
  std::string parent;              // the parent's msg_id; "" for none
  std::optional<Channel> channel;  // a reply's; none for iopub
};

class FakeClient final : public ClientDoor {
 public:
  void publish(const std::string& type, nlohmann::json content,
               const WireMessage* parent) override {
    sent.push_back({type, std::move(content), parent ? parent->id() : "", std::nullopt});
  }
  void publish_comm(const std::string& type, nlohmann::json content, nlohmann::json,
                    const WireMessage* parent, std::vector<std::string>) override {
    publish(type, std::move(content), parent);
  }
  void reply(Channel channel, const WireMessage& parent, const std::string& type,
             nlohmann::json content, nlohmann::json) override {
    sent.push_back({type, std::move(content), parent.id(), channel});
  }
  void status(const std::string& state, const WireMessage* parent) override {
    publish("status", {{"execution_state", state}}, parent);
  }
  // The messages of one type, in order.
  std::vector<Sent> of(const std::string& type) const {
    std::vector<Sent> found;
    for (const auto& s : sent)
      if (s.type == type) found.push_back(s);
    return found;
  }
  std::vector<Sent> sent;
};

class FakeAudit final : public AuditRecords {
 public:
  bool record(const std::string& event, nlohmann::json fields) override {
    if (failing) {
      ++failures_;
      last_failure_ = "write(audit.jsonl): No space left on device";
      return false;
    }
    records.push_back({event, std::move(fields)});
    return true;
  }
  uint64_t failures() const override { return failures_; }
  const std::string& last_failure() const override { return last_failure_; }
  std::vector<nlohmann::json> of(const std::string& event) const {
    std::vector<nlohmann::json> found;
    for (const auto& [e, fields] : records)
      if (e == event) found.push_back(fields);
    return found;
  }
  bool failing = false;
  std::vector<std::pair<std::string, nlohmann::json>> records;

 private:
  uint64_t failures_ = 0;
  std::string last_failure_;
};

class FakeWorker final : public WorkerDoor {
 public:
  void send(const nlohmann::json& frame) override { frames.push_back(frame); }
  void fault(const std::string& why) override { faults.push_back(why); }
  std::vector<nlohmann::json> frames;
  std::vector<std::string> faults;
};

// A budget of `bytes`, as a request's starts.
inline OutputBudget budget_of(uint64_t bytes) {
  OutputBudget budget;
  budget.reset(bytes);
  return budget;
}

// A request as a client would send it.
inline WireMessage request(const std::string& type, const std::string& msg_id,
                           nlohmann::json content = nlohmann::json::object()) {
  WireMessage message;
  message.header = {{"msg_id", msg_id}, {"msg_type", type}, {"session", "s"}, {"version", "5.3"}};
  message.content = std::move(content);
  return message;
}

}  // namespace belljar::testing
