#pragma once
// The MCP front door: `belljar mcp` serves the Model Context Protocol on stdio (JSON-RPC 2.0,
// one message per line). stdout carries protocol messages only; logs go to stderr. It speaks
// the revisions of mcp_revision.hpp: by initialize through 2025-11-25, and 2026-07-28's
// per-request revision (server/discover, resultType on every result). On 2025-11-25, a
// run_python call may be a task (mcp_tasks.hpp): answered at once, run in its turn, its result
// fetched later; tasks/cancel interrupts it.
// Tool calls run one at a time, in the order they came, each as a request to the session
// core; ping, tools/list and cancellations are answered at once, even while a cell runs.
#include <unistd.h>

#include <chrono>
#include <deque>
#include <optional>
#include <string>

#include "kernel/mcp/json_lines.hpp"
#include "kernel/mcp/json_rpc.hpp"
#include "kernel/mcp/mcp_revision.hpp"
#include "kernel/mcp/mcp_tasks.hpp"
#include "kernel/mcp/mcp_tools.hpp"
#include "kernel/observability/diagnostics.hpp"
#include "kernel/session/frontend.hpp"
#include "kernel/session/run_record.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

class McpFrontend : public Frontend {
 public:
  McpFrontend(Kernel& kernel, Policy policy, int in_fd = STDIN_FILENO, int out_fd = STDOUT_FILENO);
  ~McpFrontend() override;  // gives stdout back its blocking mode
  McpFrontend(const McpFrontend&) = delete;
  McpFrontend& operator=(const McpFrontend&) = delete;

  void add_poll_items(std::vector<zmq::pollitem_t>& items) override;
  void handle(const zmq::pollitem_t* items, Kernel& kernel) override;
  void collect_pending(Kernel&) override {}  // calls are queued here, never in the kernel
  void reply(Channel channel, const WireMessage& parent, const std::string& type,
             nlohmann::json content, nlohmann::json metadata) override;
  void publish(const std::string& type, nlohmann::json content, const WireMessage* parent) override;
  void request_input(const WireMessage& parent, nlohmann::json content) override;
  std::optional<std::chrono::steady_clock::time_point> next_wakeup() const override;

 private:
  using Clock = std::chrono::steady_clock;
  struct ToolCall {
    nlohmann::json id;                      // the JSON-RPC request's
    const McpRevision* revision = nullptr;  // the revision its answer is shaped for
    std::optional<std::string> task;        // run as this task: answered through tasks/result
    McpTool tool = McpTool::run_python;
    nlohmann::json arguments;
    std::optional<nlohmann::json> progress_token;
    bool cancelled = false;
    std::string request_id;  // msg_id of its execute_request in the kernel
    Clock::time_point started;
    Clock::time_point next_progress;
    double last_progress = 0;
    RunRecord record;
  };

  void read_input();
  void handle_line(std::string_view line);
  void handle_request(const JsonRpcMessage& message);
  void answer(const nlohmann::json& id, nlohmann::json result, const McpRevision& revision,
              bool cacheable = false);
  void handle_notification(const JsonRpcMessage& message);
  void queue_tool_call(const JsonRpcMessage& message, const McpRevision& revision);
  void handle_task_request(const JsonRpcMessage& message, const McpRevision& revision);
  void cancel_task(const JsonRpcMessage& message, const McpRevision& revision,
                   const std::string& task);
  // Answers each tasks/result that waits for `task`, now that it has ended.
  void answer_result_waits(const std::string& task);
  void answer_task_result(const nlohmann::json& id, const std::string& task,
                          const McpRevision& revision);
  std::string progress_text(const ToolCall& call, Clock::time_point now) const;
  void cancel(const nlohmann::json& request_id);
  void start_next();
  void submit_execute(ToolCall& call, const std::string& code, bool silent,
                      nlohmann::json user_expressions);
  void finish_call(const nlohmann::json& reply_content, const nlohmann::json& reply_metadata);
  void send_progress(Clock::time_point now);
  void send(const nlohmann::json& message);
  void flush_output();
  void stop_if_done();
  static nlohmann::json for_client(nlohmann::json result, const McpRevision& revision);

  Kernel& kernel_;
  Policy policy_;
  int in_fd_, out_fd_;
  int out_flags_ = -1;  // stdout's flags before O_NONBLOCK, restored at exit
  JsonLines lines_;
  std::string outbox_;
  bool input_open_ = true;
  bool output_broken_ = false;
  // Negotiated by initialize; a request that names its revision in _meta (2026-07-28) is
  // answered in that one.
  const McpRevision* revision_ = nullptr;
  std::deque<ToolCall> waiting_;
  std::optional<ToolCall> running_;
  McpTasks tasks_;
  struct ResultWait {  // a tasks/result request, answered when its task ends
    nlohmann::json id;
    std::string task;
    const McpRevision* revision;
  };
  std::vector<ResultWait> result_waits_;
  bool start_due_ = false;
  RateLimitedLog log_;
};

}  // namespace belljar
