// The egress path through a real jail: the jail's init listens on 127.0.0.1:3128 inside the
// sandbox's network namespace and hands each connection to the proxy over the channel the
// supervisor gave the warden; nothing else leads out. A fake worker probes it from inside.
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <sstream>
#include <thread>

#include "egress_harness.hpp"
#include "sandbox/egress/egress_proxy.hpp"
#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

namespace {

// What a client inside does: one proxied request, by hand, and a direct one that must fail.
const char* kProxiedRequest = R"(
def fetch(port, path='/hello'):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
    s.sendall(('GET http://127.0.0.1:%d%s HTTP/1.1\r\n\r\n' % (port, path)).encode())
    data = b''
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode(errors='replace')
port = int(os.environ['UPSTREAM_PORT'])
)";

Policy egress_policy(const TempDir& ws, uint16_t upstream) {
  Policy policy = test_policy(ws.path);
  policy.allow_net = {rule("127.0.0.1:" + std::to_string(upstream))};
  policy.set_env = {{"UPSTREAM_PORT", std::to_string(upstream)}};
  return policy;
}

}  // namespace

TEST_CASE("inside the jail, 127.0.0.1:3128 leads to the proxy and nothing else leads out",
          "[egress][sandbox]") {
  Upstream up;
  TempDir ws;
  Policy policy = egress_policy(ws, up.port());
  FakeWorker fake(std::string(kProxiedRequest) + R"(
direct = attempt(lambda: socket.create_connection(('127.0.0.1', port), timeout=3))
report({'env': [os.environ.get(n) for n in ('HTTP_PROXY', 'https_proxy', 'ALL_PROXY')],
        'via_proxy': fetch(port), 'direct': direct,
        'fds': sorted(int(fd) for fd in os.listdir('/proc/self/fd'))})
)");
  WorkerProcess worker = WorkerProcess::start(policy, fake.launch());
  Fd channel = worker.take_egress_channel();
  REQUIRE(channel);
  EgressProxy proxy(policy.allow_net);
  proxy.attach(std::move(channel));
  SandboxRun run = collect(worker);
  auto result = run.result();
  CHECK(result["env"] == nlohmann::json::array({"http://127.0.0.1:3128", "http://127.0.0.1:3128",
                                                "http://127.0.0.1:3128"}));
  CHECK(status_line(result["via_proxy"]) == "HTTP/1.1 200 OK");
  CHECK(body_of(result["via_proxy"]) == "hello");
  CHECK(result["direct"]["errno"] == "ECONNREFUSED");  // the sandbox's 127.0.0.1 is its own
  // The egress channel stays with init: 0-4 are the worker's (4: the debug channel), 5 is the
  // listing's own.
  for (int fd : result["fds"]) CHECK(fd <= 5);
  auto decisions = proxy.take_decisions().items;
  REQUIRE(decisions.size() == 1);
  CHECK(decisions[0].decision == "allowed");
}

TEST_CASE("without an allowlist there is no proxy port and no proxy variable",
          "[egress][sandbox]") {
  TempDir ws;
  Policy policy = test_policy(ws.path);
  FakeWorker fake(R"(
s = socket.socket(); s.settimeout(3)
report({'connect': errno.errorcode.get(s.connect_ex(('127.0.0.1', 3128))),
        'proxies': sorted(n for n in os.environ if n.lower().endswith('_proxy'))})
)");
  WorkerProcess worker = WorkerProcess::start(policy, fake.launch());
  CHECK_FALSE(worker.take_egress_channel());
  auto result = collect(worker).result();
  CHECK(result["connect"] == "ECONNREFUSED");
  CHECK(result["proxies"].empty());
}

TEST_CASE("init queues connections rather than wait for a proxy that does not read",
          "[egress][sandbox]") {
  Upstream up;
  TempDir ws;
  Policy policy = egress_policy(ws, up.port());
  // 300 connections while nobody reads the channel: more than it carries in flight, so init
  // must queue the rest without blocking; once the proxy reads, a request goes through.
  FakeWorker fake(std::string(kProxiedRequest) + R"(
refused = 0
for _ in range(300):
    s = socket.socket(); s.settimeout(5)
    try:
        s.connect(('127.0.0.1', 3128))
    except OSError:
        refused += 1
    s.close()
report({'flooded': True, 'refused': refused})
report({'after': fetch(port)})  # waits in init's queue until the proxy, started now, reads
)");
  WorkerProcess worker = WorkerProcess::start(policy, fake.launch());
  Fd channel = worker.take_egress_channel();
  REQUIRE(channel);
  std::optional<EgressProxy> proxy;
  SandboxRun run = collect(worker, 60, [&](WorkerProcess&, const std::string& frames) {
    if (!proxy && frames.find("flooded") != std::string::npos) {
      proxy.emplace(policy.allow_net);
      proxy->attach(std::move(channel));
    }
  });
  std::vector<nlohmann::json> reports;
  std::istringstream lines(run.frames);
  for (std::string line; std::getline(lines, line);) reports.push_back(nlohmann::json::parse(line));
  REQUIRE(reports.size() == 2);
  CHECK(reports[0]["refused"] == 0);  // init kept accepting (and queueing) throughout
  CHECK(status_line(reports[1]["after"]) == "HTTP/1.1 200 OK");
}

TEST_CASE("when the proxy's end is gone, the port closes and the sandbox goes on",
          "[egress][sandbox]") {
  Upstream up;
  TempDir ws;
  Policy policy = egress_policy(ws, up.port());
  FakeWorker fake(R"(
first = socket.create_connection(('127.0.0.1', 3128), timeout=5)
first.settimeout(5)
got = attempt(lambda: first.recv(10))
def connect():
    s = socket.socket(); s.settimeout(3)
    try:
        return errno.errorcode.get(s.connect_ex(('127.0.0.1', 3128)))
    finally:
        s.close()
# init closes its port right after it lets `first` go, and nothing in here marks that moment:
# the probe asks again until it is refused (5 s at most).
deadline = time.monotonic() + 5
then = connect()
while then != 'ECONNREFUSED' and time.monotonic() < deadline:
    time.sleep(0.01)
    then = connect()
report({'first': got, 'then': then})
)");
  WorkerProcess worker = WorkerProcess::start(policy, fake.launch());
  worker.take_egress_channel().reset();  // the supervisor's end closes
  auto result = collect(worker).result();
  CHECK((result["first"].value("value", "") == "b''" ||
         result["first"].value("errno", "") == "ECONNRESET"));
  CHECK(result["then"] == "ECONNREFUSED");
}
