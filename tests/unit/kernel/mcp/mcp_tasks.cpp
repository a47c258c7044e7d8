// The table of an MCP client's tasks: ids, statuses, results kept for their ttl, and the bounds
// that keep a client from growing the server.
#include "kernel/mcp/mcp_tasks.hpp"

#include <catch2/catch.hpp>
#include <set>

using namespace belljar;
using json = nlohmann::json;
using namespace std::chrono_literals;

TEST_CASE("a task is working, then done with its result, then gone after its ttl", "[mcp_tasks]") {
  McpTasks tasks;
  auto now = McpTasks::Clock::now();
  auto id = tasks.create(json(5000), now);
  REQUIRE(id);
  json shown = tasks.describe(*id);
  CHECK(shown["taskId"] == *id);
  CHECK(shown["status"] == "working");
  CHECK(shown["ttl"] == 5000);
  CHECK(shown["pollInterval"] == McpTasks::kPollInterval.count());
  CHECK(shown["createdAt"].get<std::string>().back() == 'Z');
  CHECK_FALSE(shown.contains("statusMessage"));
  CHECK_FALSE(tasks.result(*id));

  tasks.progress(*id, "run_python running for 1 s; output so far: 1", now + 1s);
  CHECK(tasks.describe(*id)["statusMessage"] == "run_python running for 1 s; output so far: 1");

  tasks.finish(*id, TaskStatus::completed, {{"content", json::array()}}, now + 2s);
  CHECK(tasks.describe(*id)["status"] == "completed");
  REQUIRE(tasks.result(*id));
  CHECK(*tasks.result(*id) == json{{"content", json::array()}});
  // A second end changes nothing: the first one stands.
  tasks.finish(*id, TaskStatus::cancelled, nullptr, now + 3s);
  CHECK(tasks.status(*id) == TaskStatus::completed);

  // Kept past its ttl for a minute after it ended, then gone.
  tasks.expire(now + 30s);
  CHECK(tasks.known(*id));
  tasks.expire(now + 2s + McpTasks::kAfterEnd);
  CHECK_FALSE(tasks.known(*id));
  CHECK(tasks.describe(*id).is_null());
}

TEST_CASE("a cancelled task has no result, a working task never expires", "[mcp_tasks]") {
  McpTasks tasks;
  auto now = McpTasks::Clock::now();
  auto cancelled = *tasks.create(nullptr, now);
  auto running = *tasks.create(json(1), now);
  tasks.finish(cancelled, TaskStatus::cancelled, {{"content", "x"}}, now);
  CHECK(tasks.describe(cancelled)["status"] == "cancelled");
  CHECK_FALSE(tasks.result(cancelled));
  CHECK(tasks.describe(cancelled)["ttl"] == McpTasks::kDefaultTtl.count());  // none asked
  tasks.expire(now + 10h);
  CHECK(tasks.known(running));
  CHECK_FALSE(tasks.known(cancelled));
}

TEST_CASE("ttls are bounded, ids are random, and working tasks are bounded", "[mcp_tasks]") {
  McpTasks tasks;
  auto now = McpTasks::Clock::now();
  CHECK(tasks.describe(*tasks.create(json(1e300), now))["ttl"] == McpTasks::kMaxTtl.count());
  CHECK(tasks.describe(*tasks.create(json(-5), now))["ttl"] == McpTasks::kDefaultTtl.count());
  CHECK(tasks.describe(*tasks.create(json("60000"), now))["ttl"] == McpTasks::kDefaultTtl.count());
  std::set<std::string> ids;
  for (const auto& task : tasks.describe_all()) ids.insert(task["taskId"].get<std::string>());
  while (tasks.describe_all().size() < McpTasks::kMaxTasks) {
    auto id = tasks.create(nullptr, now);
    REQUIRE(id);
    ids.insert(*id);
  }
  CHECK(ids.size() == McpTasks::kMaxTasks);
  CHECK_FALSE(tasks.create(nullptr, now));  // all working: refused
  // One finished: the next one takes its place.
  std::string first = tasks.describe_all()[0]["taskId"];
  tasks.finish(first, TaskStatus::completed, json::object(), now);
  auto next = tasks.create(nullptr, now);
  REQUIRE(next);
  CHECK_FALSE(tasks.known(first));
  CHECK(tasks.describe_all().size() == McpTasks::kMaxTasks);
}

TEST_CASE("results past the byte bound go oldest first, the newest kept", "[mcp_tasks]") {
  McpTasks tasks;
  auto now = McpTasks::Clock::now();
  std::string big(McpTasks::kMaxKept / 2 + 1, 'x');
  auto a = *tasks.create(nullptr, now);
  auto b = *tasks.create(nullptr, now);
  auto c = *tasks.create(nullptr, now);
  tasks.finish(a, TaskStatus::completed, big, now);
  tasks.finish(b, TaskStatus::completed, big, now);
  CHECK_FALSE(tasks.known(a));
  CHECK(tasks.known(b));
  CHECK(tasks.known(c));  // working: never dropped for room
}
