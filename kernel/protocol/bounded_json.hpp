#pragma once
// JSON from outside (clients, the worker) parsed with limits, checked by a SAX pass before any
// value is built: nesting depth (serialising a deeply nested value back would recurse) and the
// memory the parsed value would take (a 16 MiB frame of `{}` is ~600 MiB of nlohmann values).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace belljar {

inline constexpr int kMaxJsonDepth = 100;
// The parsed value's estimated size: a 64 MiB frame of one string fits, `[{},{},...]` does not.
inline constexpr uint64_t kMaxJsonFootprint = 160ull << 20;

// The parsed value, or nullopt with *why set (for the log).
std::optional<nlohmann::json> parse_bounded_json(std::string_view text, std::string* why);

// Serialise, replacing invalid UTF-8 instead of throwing (worker output can be any bytes).
std::string dump_json(const nlohmann::json& value);

}  // namespace belljar
