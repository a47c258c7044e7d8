#include "kernel/mcp/mcp_tasks.hpp"

#include <algorithm>

#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/wire_message.hpp"

namespace belljar {

using json = nlohmann::json;

const char* task_status_name(TaskStatus status) {
  switch (status) {
    case TaskStatus::working:
      return "working";
    case TaskStatus::completed:
      return "completed";
    case TaskStatus::failed:
      return "failed";
    case TaskStatus::cancelled:
      return "cancelled";
  }
  return "failed";
}

std::optional<std::string> McpTasks::create(const json& ttl_ms, Clock::time_point now) {
  expire(now);
  if (tasks_.size() >= kMaxTasks) {
    // Room is made by the oldest finished task; working ones are never dropped.
    auto finished = std::find_if(tasks_.begin(), tasks_.end(),
                                 [](const Task& t) { return t.status != TaskStatus::working; });
    if (finished == tasks_.end()) return std::nullopt;
    kept_bytes_ -= finished->result_bytes;
    tasks_.erase(finished);
  }
  Task task;
  task.id = new_uuid();
  task.created = task.updated = now;
  task.ttl = kDefaultTtl;
  if (ttl_ms.is_number() && ttl_ms.get<double>() >= 0)
    task.ttl = std::min(kMaxTtl, std::chrono::milliseconds(static_cast<long long>(
                                     std::min(ttl_ms.get<double>(), double(kMaxTtl.count())))));
  tasks_.push_back(std::move(task));
  return tasks_.back().id;
}

const McpTasks::Task* McpTasks::find(const std::string& id) const {
  for (const auto& task : tasks_)
    if (task.id == id) return &task;
  return nullptr;
}

McpTasks::Task* McpTasks::find(const std::string& id) {
  return const_cast<Task*>(std::as_const(*this).find(id));
}

std::optional<TaskStatus> McpTasks::status(const std::string& id) const {
  const Task* task = find(id);
  return task ? std::optional(task->status) : std::nullopt;
}

json McpTasks::describe(const Task& task) {
  json out = {{"taskId", task.id},
              {"status", task_status_name(task.status)},
              {"createdAt", iso8601(task.created)},
              {"lastUpdatedAt", iso8601(task.updated)},
              {"ttl", task.ttl.count()},
              {"pollInterval", kPollInterval.count()}};
  if (!task.message.empty()) out["statusMessage"] = task.message;
  return out;
}

json McpTasks::describe(const std::string& id) const {
  const Task* task = find(id);
  return task ? describe(*task) : json();
}

json McpTasks::describe_all() const {
  json all = json::array();
  for (const auto& task : tasks_) all.push_back(describe(task));
  return all;
}

void McpTasks::progress(const std::string& id, std::string message, Clock::time_point now) {
  Task* task = find(id);
  if (!task || task->status != TaskStatus::working || task->message == message) return;
  task->message = std::move(message);
  task->updated = now;
}

void McpTasks::finish(const std::string& id, TaskStatus status, json result,
                      Clock::time_point now) {
  Task* task = find(id);
  if (!task || task->status != TaskStatus::working) return;
  task->status = status;
  task->updated = now;
  task->message.clear();
  if (status == TaskStatus::cancelled) task->message = "cancelled by the client";
  if (status == TaskStatus::failed && result.is_string()) task->message = result.get<std::string>();
  task->result_bytes = status == TaskStatus::cancelled ? 0 : dump_json(result).size();
  if (status != TaskStatus::cancelled) task->result = std::move(result);
  kept_bytes_ += task->result_bytes;
  expire(now);
}

const json* McpTasks::result(const std::string& id) const {
  const Task* task = find(id);
  if (!task || task->status == TaskStatus::working || task->status == TaskStatus::cancelled)
    return nullptr;
  return &task->result;
}

void McpTasks::expire(Clock::time_point now) {
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    bool finished = it->status != TaskStatus::working;
    bool outlived = finished && now >= std::max(it->created + it->ttl, it->updated + kAfterEnd);
    // Past the byte bound the oldest finished results go first; the newest is always kept.
    bool over = finished && kept_bytes_ > kMaxKept && &*it != &tasks_.back();
    if (outlived || over) {
      kept_bytes_ -= it->result_bytes;
      it = tasks_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace belljar
