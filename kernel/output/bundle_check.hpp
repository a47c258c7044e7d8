#pragma once
// Validation of mime bundles from the worker before they reach a client or a saved notebook.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace belljar {

// Why the bundle must not be forwarded, or nullopt when it is sound: every key a mime type,
// text types strings, images valid base64, JSON types parseable JSON.
std::optional<std::string> bundle_problem(const nlohmann::json& data);

}  // namespace belljar
