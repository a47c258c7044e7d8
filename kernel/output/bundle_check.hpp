#pragma once
// Validation of mime bundles from the worker before they reach a client or a saved notebook.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace belljar {

// Why the bundle must not be forwarded, or nullopt when it is sound: every key a mime type,
// text types strings, images valid base64, JSON types parseable JSON.
std::optional<std::string> bundle_problem(const nlohmann::json& data);

}  // namespace belljar
