#include "kernel/output/payloads.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace belljar {

using json = nlohmann::json;

namespace {

// The item rebuilt in its source's shape, or nothing.
std::optional<json> checked_item(const json& item) {
  if (!item.is_object()) return std::nullopt;
  auto source = item.find("source");
  if (source == item.end() || !source->is_string()) return std::nullopt;
  const std::string& name = source->get_ref<const std::string&>();
  auto boolean = [&](const char* key) -> std::optional<bool> {
    auto it = item.find(key);
    if (it == item.end()) return false;  // ipykernel's default
    if (!it->is_boolean()) return std::nullopt;
    return it->get<bool>();
  };
  if (name == "set_next_input") {
    auto text = item.find("text");
    auto replace = boolean("replace");
    if (text == item.end() || !text->is_string() || !replace) return std::nullopt;
    return json{{"source", name}, {"text", *text}, {"replace", *replace}};
  }
  if (name == "ask_exit") {
    auto keep = boolean("keepkernel");
    if (!keep) return std::nullopt;
    return json{{"source", name}, {"keepkernel", *keep}};
  }
  if (name == "page") {
    auto data = item.find("data");
    auto start = item.find("start");
    if (data == item.end() || !data->is_object() || data->empty()) return std::nullopt;
    json page = {{"source", name}, {"data", *data}, {"start", 0}};
    if (start != item.end()) {
      if (!start->is_number_integer() || start->get<int64_t>() < 0) return std::nullopt;
      page["start"] = *start;
    }
    return page;
  }
  return std::nullopt;
}

}  // namespace

CheckedPayload checked_payload(const json& sent) {
  CheckedPayload checked;
  if (!sent.is_array()) {
    checked.dropped = sent.is_null() ? 0 : 1;
    return checked;
  }
  for (const auto& item : sent) {
    if (auto kept = checked_item(item))
      checked.items.push_back(std::move(*kept));
    else
      ++checked.dropped;
  }
  return checked;
}

}  // namespace belljar
