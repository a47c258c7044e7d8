#pragma once
// JSON from outside (clients, the worker) parsed with limits: nesting depth is checked before
// nlohmann sees the text, because serialising a deeply nested value back would recurse.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace belljar {

inline constexpr int kMaxJsonDepth = 100;

// The parsed value, or nullopt with *why set (for the log).
std::optional<nlohmann::json> parse_bounded_json(std::string_view text, std::string* why);

// Serialise, replacing invalid UTF-8 instead of throwing (worker output can be any bytes).
std::string dump_json(const nlohmann::json& value);

}  // namespace belljar
