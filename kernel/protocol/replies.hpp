#pragma once
// Builders for reply and broadcast contents, so handlers never assemble protocol JSON inline.
#include <nlohmann/json.hpp>
#include <string>

namespace belljar {

using json = nlohmann::json;

json create_kernel_info_reply(const json& language_info, const std::string& banner);
json create_execute_reply_ok(int execution_count, json user_expressions, json payload);
json create_execute_reply_error(int execution_count, const json& error);
json create_aborted_reply();
json create_error_content(const std::string& ename, const std::string& evalue, json traceback);
json create_complete_reply(const json& worker_reply);
json create_inspect_reply(const json& worker_reply);  // data as the worker sent it
json create_is_complete_reply(const json& worker_reply);
json create_history_reply(json history);
json create_comm_info_reply();
json create_shutdown_reply(bool restart);
json create_interrupt_reply();
json create_status(const std::string& state);
json create_stream(const std::string& name, const std::string& text);
json create_execute_input(const std::string& code, int execution_count);

}  // namespace belljar
