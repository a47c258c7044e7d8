#include "kernel/protocol/replies.hpp"

#include "kernel/protocol/json_field.hpp"
#include "kernel/protocol/wire_message.hpp"

namespace belljar {

namespace {
// The worker is untrusted: copy only fields of the expected type into a reply (json_field for
// scalars, these for objects and lists).
json object_field(const json& source, const char* key) {
  auto it = source.find(key);
  return it != source.end() && it->is_object() ? *it : json::object();
}
json string_list(const json& source, const char* key) {
  json out = json::array();
  auto it = source.find(key);
  if (it == source.end() || !it->is_array()) return out;
  for (auto& item : *it)
    if (item.is_string()) out.push_back(item);
  return out;
}
}  // namespace

json create_kernel_info_reply(const json& language_info, const std::string& banner) {
  return {{"status", "ok"},
          {"protocol_version", kProtocolVersion},
          {"implementation", "belljar"},
          {"implementation_version", BELLJAR_VERSION},
          {"language_info", language_info},
          {"banner", banner},
          {"debugger", false},
          {"help_links",
           json::array({{{"text", "Python Reference"}, {"url", "https://docs.python.org/3/"}}})}};
}

json create_execute_reply_ok(int execution_count, json user_expressions, json payload) {
  return {{"status", "ok"},
          {"execution_count", execution_count},
          {"user_expressions", user_expressions.is_object() ? user_expressions : json::object()},
          {"payload", payload.is_array() ? payload : json::array()}};
}

json create_execute_reply_error(int execution_count, const json& error) {
  json reply = error;
  reply["status"] = "error";
  reply["execution_count"] = execution_count;
  reply["user_expressions"] = json::object();
  reply["payload"] = json::array();
  return reply;
}

json create_aborted_reply() {
  return {{"status", "aborted"}};
}

json create_error_content(const std::string& ename, const std::string& evalue, json traceback) {
  return {{"ename", ename}, {"evalue", evalue}, {"traceback", std::move(traceback)}};
}

json create_complete_reply(const json& reply) {
  return {{"status", "ok"},
          {"matches", string_list(reply, "matches")},
          {"cursor_start", json_field<long long>(reply, "cursor_start", 0)},
          {"cursor_end", json_field<long long>(reply, "cursor_end", 0)},
          {"metadata", object_field(reply, "metadata")}};
}

json create_inspect_reply(const json& reply) {
  return {{"status", "ok"},
          {"found", json_field<bool>(reply, "found", false)},
          {"data", object_field(reply, "data")},
          {"metadata", object_field(reply, "metadata")}};
}

json create_is_complete_reply(const json& reply) {
  std::string status = json_field<std::string>(reply, "status", "unknown");
  if (status != "complete" && status != "incomplete" && status != "invalid") status = "unknown";
  json out = {{"status", status}};
  if (status == "incomplete") out["indent"] = json_field<std::string>(reply, "indent", "");
  return out;
}

json create_history_reply(json history) {
  return {{"status", "ok"}, {"history", history}};
}
json create_comm_info_reply() {
  return {{"status", "ok"}, {"comms", json::object()}};
}
json create_shutdown_reply(bool restart) {
  return {{"status", "ok"}, {"restart", restart}};
}
json create_interrupt_reply() {
  return {{"status", "ok"}};
}
json create_status(const std::string& state) {
  return {{"execution_state", state}};
}
json create_stream(const std::string& name, const std::string& text) {
  return {{"name", name}, {"text", text}};
}
json create_execute_input(const std::string& code, int execution_count) {
  return {{"code", code}, {"execution_count", execution_count}};
}

}  // namespace belljar
