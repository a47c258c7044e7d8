#pragma once
// The tasks an MCP client made of its tool calls (MCP 2025-11-25, "tasks"): a `tools/call` that
// carries `task` is answered at once with a task, runs in its turn like any call, and its
// result is fetched later (`tasks/result`, which waits for it), while `tasks/get` says how it
// is going (its output so far) and `tasks/cancel` interrupts it. This part owns the table: each
// task's id, status and times, and the result once it is done; the frontend owns the calls.
//
// Bounds, so a client cannot grow the server: at most kMaxTasks tasks are kept (one more is
// refused while all are working; else the oldest finished one goes); a finished task is kept
// for its ttl (asked by the client, at most kMaxTtl, kDefaultTtl when not asked) from its
// creation, and at least kAfterEnd after it ended, or until kMaxKept bytes of results are held,
// oldest first. Task ids are random
// (uuid4 from getrandom): one client's id tells nothing of another's.
#include <chrono>
#include <cstddef>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace belljar {

enum class TaskStatus { working, completed, failed, cancelled };
const char* task_status_name(TaskStatus status);

class McpTasks {
 public:
  using Clock = std::chrono::system_clock;

  static constexpr size_t kMaxTasks = 64;
  static constexpr std::chrono::milliseconds kDefaultTtl{std::chrono::minutes(10)};
  static constexpr std::chrono::milliseconds kMaxTtl{std::chrono::hours(1)};
  static constexpr size_t kMaxKept = 64u << 20;  // bytes of finished results
  static constexpr std::chrono::milliseconds kPollInterval{500};
  // A finished task stays at least this long after it ended, whatever its ttl: a short ttl on a
  // long cell would otherwise lose the result the moment it came.
  static constexpr std::chrono::milliseconds kAfterEnd{std::chrono::minutes(1)};

  // A new working task, its ttl as asked (`ttl_ms`: a number, else the default) within the
  // bounds; nullopt when kMaxTasks tasks are working.
  std::optional<std::string> create(const nlohmann::json& ttl_ms, Clock::time_point now);
  bool known(const std::string& id) const { return find(id) != nullptr; }
  std::optional<TaskStatus> status(const std::string& id) const;

  // The task as MCP shows it (taskId, status, statusMessage, createdAt, lastUpdatedAt, ttl,
  // pollInterval); null for an id not (or no longer) known.
  nlohmann::json describe(const std::string& id) const;
  nlohmann::json describe_all() const;

  // A working task's progress (what its output is so far), for tasks/get.
  void progress(const std::string& id, std::string message, Clock::time_point now);
  // A working task ends: its result kept, or it failed (`result` is then the error's text).
  void finish(const std::string& id, TaskStatus status, nlohmann::json result,
              Clock::time_point now);
  // The result of a finished task (completed or failed); null otherwise.
  const nlohmann::json* result(const std::string& id) const;

  // Drops what has outlived its ttl, and finished tasks past the bounds.
  void expire(Clock::time_point now);

 private:
  struct Task {
    std::string id;
    TaskStatus status = TaskStatus::working;
    std::string message;
    Clock::time_point created, updated;
    std::chrono::milliseconds ttl{};
    nlohmann::json result;
    size_t result_bytes = 0;
  };
  const Task* find(const std::string& id) const;
  Task* find(const std::string& id);
  static nlohmann::json describe(const Task& task);

  std::deque<Task> tasks_;  // oldest first
  size_t kept_bytes_ = 0;
};

}  // namespace belljar
