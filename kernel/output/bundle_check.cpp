#include "kernel/output/bundle_check.hpp"

#include "kernel/protocol/bounded_json.hpp"

namespace belljar {

namespace {
bool is_base64(const std::string& text) {
  size_t symbols = 0, padding = 0;
  for (unsigned char c : text) {
    if (c == '\n' || c == '\r') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    if (padding || !(std::isalnum(c) || c == '+' || c == '/')) return false;
    ++symbols;
  }
  return padding <= 2 && (symbols + padding) % 4 == 0 && symbols > 0;
}

bool is_json_mime(const std::string& mime) {
  return mime == "application/json" ||
         (mime.size() > 5 && mime.compare(mime.size() - 5, 5, "+json") == 0);
}
}  // namespace

std::optional<std::string> bundle_problem(const nlohmann::json& data) {
  if (!data.is_object()) return "the data is not an object";
  if (data.empty()) return "the bundle is empty";
  for (auto& [mime, value] : data.items()) {
    auto slash = mime.find('/');
    if (mime.size() > 255 || slash == std::string::npos || slash == 0 || slash + 1 == mime.size())
      return "\"" + mime.substr(0, 64) + "\" is not a mime type";
    bool binary_image = mime.rfind("image/", 0) == 0 && mime != "image/svg+xml";
    if (binary_image) {
      if (!value.is_string() || !is_base64(value.get_ref<const std::string&>()))
        return mime + " is not valid base64";
    } else if (is_json_mime(mime)) {
      if (value.is_string()) {
        if (!parse_bounded_json(value.get_ref<const std::string&>(), nullptr))
          return mime + " does not parse as JSON";
      }
    } else if (mime.rfind("text/", 0) == 0 || mime == "image/svg+xml") {
      bool lines =
          value.is_array() && std::all_of(value.begin(), value.end(),
                                          [](const nlohmann::json& v) { return v.is_string(); });
      if (!value.is_string() && !lines) return mime + " is not text";
    }
  }
  return std::nullopt;
}

}  // namespace belljar
