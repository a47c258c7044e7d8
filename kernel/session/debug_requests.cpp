#include "kernel/session/debug_requests.hpp"

#include <algorithm>
#include <array>

#include "kernel/protocol/json_field.hpp"

namespace belljar {

namespace {
using json = nlohmann::json;

constexpr std::array<std::string_view, 27> kAllowedCommands = {
    "initialize",
    "attach",
    "debugInfo",
    "dumpCell",
    "setBreakpoints",
    "setExceptionBreakpoints",
    "configurationDone",
    "threads",
    "stackTrace",
    "scopes",
    "variables",
    "inspectVariables",
    "richInspectVariables",
    "evaluate",
    "continue",
    "next",
    "stepIn",
    "stepOut",
    "pause",
    "source",
    "copyToGlobals",
    "modules",
    "disconnect",
    "exceptionInfo",
    "setVariable",
    "setExpression",
    "completions",
};

constexpr std::array<std::string_view, 5> kEssentialEvents = {"stopped", "continued", "initialized",
                                                              "exited", "terminated"};

const json* arguments_of(const json& content) {
  auto it = content.find("arguments");
  return it != content.end() && it->is_object() ? &*it : nullptr;
}

json request_seq_of(const json& content) {
  if (!content.is_object()) return 0;
  auto it = content.find("seq");
  return it != content.end() && it->is_number_integer() ? *it : json(0);
}
}  // namespace

bool debug_command_allowed(std::string_view command) {
  return std::find(kAllowedCommands.begin(), kAllowedCommands.end(), command) !=
         kAllowedCommands.end();
}

json debug_refusal(const json& content, const std::string& message) {
  std::string command = content.is_object() ? json_field(content, "command", "") : "";
  return {{"type", "response"},
          {"request_seq", request_seq_of(content)},
          {"success", false},
          {"command", command},
          {"message", message}};
}

std::optional<std::string> debug_request_problem(const json& content) {
  if (!content.is_object()) return "a debug_request's content must be a DAP request object";
  auto command = content.find("command");
  if (command == content.end() || !command->is_string() ||
      command->get_ref<const std::string&>().empty())
    return "a debug_request needs a \"command\"";
  const std::string& name = command->get_ref<const std::string&>();
  if (!debug_command_allowed(name))
    return "the debug command " + json(name.substr(0, 64)).dump() +
           " is not available in belljar's sandbox";
  return std::nullopt;
}

std::optional<std::string> code_in_debug_request(const json& content) {
  if (!content.is_object()) return std::nullopt;
  std::string command = json_field(content, "command", "");
  const json* args = arguments_of(content);
  if (!args) return std::nullopt;
  auto text = [&](const json& object, const char* key) { return json_field(object, key, ""); };
  if (command == "evaluate") return text(*args, "expression");
  if (command == "setExpression") return text(*args, "expression") + " = " + text(*args, "value");
  if (command == "setVariable") return text(*args, "name") + " = " + text(*args, "value");
  if (command == "copyToGlobals")
    return "globals()[" + json(text(*args, "dstVariableName")).dump() +
           "] = " + text(*args, "srcVariableName");
  if (command == "setBreakpoints") {
    // A breakpoint's condition, hit condition and log message ({expressions}) are evaluated in
    // the session each time the line runs.
    auto breakpoints = args->find("breakpoints");
    if (breakpoints == args->end() || !breakpoints->is_array()) return std::nullopt;
    std::string code;
    for (const json& breakpoint : *breakpoints) {
      if (!breakpoint.is_object()) continue;
      for (const char* key : {"condition", "hitCondition", "logMessage"}) {
        std::string part = text(breakpoint, key);
        if (part.empty()) continue;
        code += std::string(key) + " at line " +
                std::to_string(json_field<int64_t>(breakpoint, "line", 0)) + ": " + part + "\n";
      }
    }
    if (code.empty()) return std::nullopt;
    return code;
  }
  return std::nullopt;
}

bool essential_debug_event(std::string_view event) {
  return std::find(kEssentialEvents.begin(), kEssentialEvents.end(), event) !=
         kEssentialEvents.end();
}

uint64_t DebugRequests::add(WireMessage request, Clock::time_point now) {
  Pending pending;
  pending.id = ++next_id_;
  pending.command = json_field(request.content, "command", "");
  pending.request_seq = request_seq_of(request.content);
  pending.deadline =
      now +
      (pending.command == "initialize" || pending.command == "attach" ? kStartDeadline : kDeadline);
  pending.request = std::move(request);
  pending_.push_back(std::move(pending));
  return next_id_;
}

std::optional<DebugRequests::Pending> DebugRequests::take(uint64_t id) {
  auto it =
      std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.id == id; });
  if (it == pending_.end()) return std::nullopt;
  Pending taken = std::move(*it);
  pending_.erase(it);
  return taken;
}

std::vector<DebugRequests::Pending> DebugRequests::take_expired(Clock::time_point now) {
  std::vector<Pending> expired;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->deadline <= now) {
      expired.push_back(std::move(*it));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

std::vector<DebugRequests::Pending> DebugRequests::take_all() {
  std::vector<Pending> all(std::make_move_iterator(pending_.begin()),
                           std::make_move_iterator(pending_.end()));
  pending_.clear();
  started_ = paused_ = false;
  return all;
}

std::optional<DebugRequests::Clock::time_point> DebugRequests::next_deadline() const {
  std::optional<Clock::time_point> next;
  for (const Pending& p : pending_)
    if (!next || p.deadline < *next) next = p.deadline;
  return next;
}

json DebugRequests::check_reply(const Pending& request, json reply) const {
  bool shaped = reply.is_object() && json_field(reply, "type", "") == "response" &&
                json_field(reply, "command", "") == request.command &&
                reply.contains("request_seq") && reply["request_seq"] == request.request_seq &&
                reply.contains("success") && reply["success"].is_boolean();
  if (!shaped)
    return debug_refusal(request.request.content, "the kernel's debugger gave a malformed answer");
  return reply;
}

void DebugRequests::note_answer(const Pending& request, const json& reply) {
  if (request.command == "initialize" && json_field(reply, "success", false)) started_ = true;
  if (request.command == "disconnect") started_ = paused_ = false;
}

bool DebugRequests::admit_event(std::string_view event, Clock::time_point now) {
  if (!started_) {
    ++events_dropped_;
    return false;
  }
  if (!window_start_ || now - *window_start_ >= kEventWindow) {
    window_start_ = now;
    events_in_window_ = 0;
  }
  ++events_in_window_;
  if (events_in_window_ <= kEventsPerWindow || essential_debug_event(event)) return true;
  ++events_dropped_;
  return false;
}

void PausedTime::resume(Clock::time_point now) {
  if (!since_) return;
  total_ += std::chrono::duration<double>(now - *since_).count();
  since_.reset();
}

double PausedTime::total(Clock::time_point now) const {
  return total_ + (since_ ? std::chrono::duration<double>(now - *since_).count() : 0.0);
}

double PausedTime::credited(Clock::time_point now, double allowance) const {
  if (forfeited_) return 0;
  return std::min(total(now), std::max(0.0, allowance));
}

void PausedTime::sample_cpu(double cpu) {
  if (last_cpu_ && since_) cpu_while_paused_ += std::max(0.0, cpu - *last_cpu_);
  last_cpu_ = cpu;
}

bool PausedTime::forfeit_if_busy(Clock::time_point now) {
  if (forfeited_ || cpu_while_paused_ <= kCpuGraceSeconds + kCpuShareOfPause * total(now))
    return false;
  resume(now);
  forfeited_ = true;
  return true;
}

PausedTime::Clock::time_point PausedTime::deadline(Clock::time_point started, double timeout,
                                                   double allowance, Clock::time_point now) const {
  double credit = credited(now, allowance);
  double counted = std::chrono::duration<double>(now - started).count() - credit;
  double left = std::max(0.0, timeout - counted);
  // Paused under the allowance: counted time stands still until the allowance is spent.
  if (since_) left += std::max(0.0, allowance - credit);
  return now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(left));
}

}  // namespace belljar
