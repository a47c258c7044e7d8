#include "kernel/bounded_json.hpp"

namespace belljar {

namespace {
// Deepest nesting of arrays/objects, skipping string contents.
int nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}') --depth;
    if (deepest > kMaxJsonDepth) break;
  }
  return deepest;
}
}  // namespace

std::optional<nlohmann::json> parse_bounded_json(std::string_view text, std::string* why) {
  if (nesting_depth(text) > kMaxJsonDepth) {
    if (why) *why = "JSON nested deeper than " + std::to_string(kMaxJsonDepth);
    return std::nullopt;
  }
  auto value = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    if (why) *why = "malformed JSON";
    return std::nullopt;
  }
  return value;
}

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace belljar
