#pragma once
// The structured parts of the worker's answers, charged against the cell's output cap
// (OutputBudget) before they reach a client: tracebacks, the execute reply's user_expressions
// and payload, input prompts, and the answers to complete/inspect/is_complete.
// The worker is the attacker: without this a 10 MB traceback or 20 MB of user_expressions
// passed an --output-limit of 1M untouched. What does not fit is cut (text, lists) or replaced
// whole by a short notice (a value that can't be cut), never sent unbounded.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kernel/output/output_stream.hpp"
#include "kernel/session/request_kind.hpp"

namespace belljar {

// Short texts that are always kept so an answer stays meaningful past the cap: an exception's
// name, the start of its message, an is_complete indent.
inline constexpr size_t kErrorNameBytes = 256;
inline constexpr size_t kErrorValueBytes = 1024;

// "[belljar] ... N bytes dropped: past the output limit of X", for the place of what was cut.
std::string output_limit_notice(const std::string& what, uint64_t bytes,
                                const OutputBudget& budget);

// The longest prefix of `text` that is complete UTF-8 and at most `bytes` long.
std::string utf8_prefix(std::string_view text, size_t bytes);

// The prefix of `text` the budget still allows (charged).
std::string charge_text(std::string_view text, OutputBudget& budget);

// An error frame's content {ename, evalue, traceback}: the name and the start of the message
// always stay (capped at the sizes above), charged all the same, past the limit if need be; the
// rest of the message and the traceback lines are charged in order, and one notice line replaces
// the lines that did not fit.
nlohmann::json charge_error(nlohmann::json error, OutputBudget& budget);

// The execute reply's user_expressions: only the names the client asked for, each value
// charged whole; a value past the cap becomes an error entry saying so.
nlohmann::json charge_user_expressions(const nlohmann::json& sent, const nlohmann::json& asked,
                                       OutputBudget& budget);

// The execute reply's payload list: each item charged whole; what does not fit is left out.
nlohmann::json charge_payload(const nlohmann::json& sent, OutputBudget& budget);

// complete/inspect/is_complete replies (as built by replies.hpp), charged against `budget`:
// matches are cut to what fits, an inspect bundle is replaced by a notice, metadata emptied.
nlohmann::json charge_request_reply(RequestKind kind, nlohmann::json reply, OutputBudget& budget);

}  // namespace belljar
