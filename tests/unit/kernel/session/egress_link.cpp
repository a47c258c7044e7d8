// The egress link alone, on a fake proxy (our EgressService interface) and a fake audit log: each
// decision is recorded with the running cell's count, a cell learns the hosts denied to it once
// each and its bound-secret totals, nothing is charged to a cell when none runs, the proxy's CPU
// is handed over once, and connections answered unread are counted, not recorded one by one.
#include "kernel/session/egress_link.hpp"

#include <catch2/catch.hpp>

#include "kernel/session/fake_doors.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

class FakeProxy final : public EgressService {
 public:
  void attach(Fd channel) override { attached += channel ? 1 : 0; }
  int decisions_fd() const override { return 42; }
  DecisionQueue::Taken take_decisions() override { return std::exchange(waiting, {}); }
  size_t open_connections() const override { return 0; }
  double cpu_seconds() const override { return cpu; }
  std::string ca_bundle_pem() const override { return "PEM"; }
  DecisionQueue::Taken waiting;
  double cpu = 0;
  int attached = 0;
};

EgressDecision decision(EgressVerdict verdict, const std::string& host, uint16_t port = 443) {
  EgressDecision d;
  d.method = "CONNECT";
  d.host = host;
  d.port = port;
  d.decision = verdict;
  return d;
}

struct Rig {
  FakeAudit audit;
  Metrics metrics{""};
  RateLimitedLog log{10};
  EgressLink link{audit, metrics, log};
  FakeProxy* proxy = nullptr;
  Rig() {
    auto made = std::make_unique<FakeProxy>();
    proxy = made.get();
    link.serve_with(std::move(made));
  }
};

}  // namespace

TEST_CASE("egress link: each decision is recorded, naming the running cell", "[egress_link]") {
  Rig rig;
  rig.proxy->waiting.items = {decision(EgressVerdict::allowed, "pypi.org"),
                              decision(EgressVerdict::denied, "evil.example")};
  CellEgress cell;
  rig.link.take_decisions(EgressLink::Clock::now(), &cell, 7);
  auto records = rig.audit.of("egress");
  REQUIRE(records.size() == 2);
  CHECK(records[0]["decision"] == "allowed");
  CHECK(records[0]["execution_count"] == 7);
  CHECK(records[1]["decision"] == "denied");
  CHECK(records[1]["host"] == "evil.example");
  CHECK(cell.denied == std::vector<std::string>{"evil.example:443"});
}

TEST_CASE("egress link: a host denied twice is named once, and never past the cap",
          "[egress_link]") {
  Rig rig;
  for (int i = 0; i < 3; ++i)
    rig.proxy->waiting.items.push_back(decision(EgressVerdict::denied, "evil.example"));
  for (size_t i = 0; i < CellEgress::kDeniedPerCell + 20; ++i)
    rig.proxy->waiting.items.push_back(
        decision(EgressVerdict::denied, "h" + std::to_string(i) + ".example"));
  CellEgress cell;
  rig.link.take_decisions(EgressLink::Clock::now(), &cell, 1);
  CHECK(cell.denied.size() == CellEgress::kDeniedPerCell);
  CHECK(std::count(cell.denied.begin(), cell.denied.end(), "evil.example:443") == 1);
}

TEST_CASE("egress link: with no cell running, nothing is charged to one", "[egress_link]") {
  Rig rig;
  rig.proxy->waiting.items = {decision(EgressVerdict::denied, "evil.example")};
  rig.link.take_decisions(EgressLink::Clock::now(), nullptr, std::nullopt);
  auto records = rig.audit.of("egress");
  REQUIRE(records.size() == 1);
  CHECK(records[0]["execution_count"].is_null());
}

TEST_CASE("egress link: a bound secret's use is totalled for the cell, by name only",
          "[egress_link]") {
  Rig rig;
  EgressDecision d = decision(EgressVerdict::allowed, "api.example");
  d.secret_use = SecretUse{{"OPENAI_API_KEY"}, true, 200, 12.5, 10, 20};
  rig.proxy->waiting.items = {d, d};
  CellEgress cell;
  rig.link.take_decisions(EgressLink::Clock::now(), &cell, 3);
  CHECK(cell.secrets.requests == 2);
  CHECK(cell.secrets.injected == 2);
  CHECK(cell.secrets.input_tokens == 20);
  CHECK(cell.secrets.output_tokens == 40);
  CHECK(cell.secrets.latency_ms == Approx(25.0));
  auto records = rig.audit.of("egress");
  REQUIRE(records.size() == 2);
  CHECK(records[0]["secrets"] == nlohmann::json::array({"OPENAI_API_KEY"}));
  CHECK(records[0]["tokens"]["input"] == 10);
}

TEST_CASE("egress link: the proxy's CPU is handed over once", "[egress_link]") {
  Rig rig;
  rig.proxy->cpu = 1.5;
  CHECK(rig.link.take_cpu() == Approx(1.5));
  CHECK(rig.link.take_cpu() == Approx(0.0));
  rig.proxy->cpu = 2.0;
  CHECK(rig.link.take_cpu() == Approx(0.5));
}

TEST_CASE("egress link: connections answered unread are counted in the summary", "[egress_link]") {
  Rig rig;
  rig.proxy->waiting.refused_unread = 500;
  auto now = EgressLink::Clock::now();
  rig.link.take_decisions(now, nullptr, std::nullopt);
  CHECK(rig.audit.of("egress").empty());
  rig.link.record_summary(now, true);
  auto summaries = rig.audit.of("egress_summary");
  REQUIRE(summaries.size() == 1);
  CHECK(summaries[0].dump().find("500") != std::string::npos);
}

TEST_CASE("egress link: with no proxy there is nothing to poll or charge", "[egress_link]") {
  FakeAudit audit;
  Metrics metrics{""};
  RateLimitedLog log{10};
  EgressLink link{audit, metrics, log};
  CHECK_FALSE(link.running());
  CHECK(link.decisions_fd() == -1);
  CHECK(link.take_cpu() == 0);
  CHECK(link.ca_bundle_pem().empty());
  CellEgress cell;
  link.take_decisions(EgressLink::Clock::now(), &cell, 1);
  CHECK(audit.records.empty());
}
