#include "sandbox/egress/model_usage.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "sandbox/os/ascii.hpp"

namespace belljar {

namespace {

constexpr size_t kJsonEnd = 64u << 10;  // kept of each end of a JSON body
constexpr size_t kMaxEventLine = 64u << 10;

std::optional<uint64_t> count(const nlohmann::json& usage, const char* a, const char* b) {
  for (const char* key : {a, b})
    if (auto it = usage.find(key); it != usage.end() && it->is_number_unsigned())
      return it->get<uint64_t>();
  return std::nullopt;
}

void take_usage(const nlohmann::json& doc, TokenUsage& usage) {
  if (!doc.is_object()) return;
  for (const nlohmann::json* holder :
       {&doc, doc.contains("message") ? &doc.at("message") : nullptr}) {
    if (!holder || !holder->is_object()) continue;
    auto it = holder->find("usage");
    if (it == holder->end() || !it->is_object()) continue;
    if (auto n = count(*it, "input_tokens", "prompt_tokens")) usage.input = n;
    if (auto n = count(*it, "output_tokens", "completion_tokens")) usage.output = n;
  }
}

// The last `"usage": {...}` in a piece of a JSON text whose whole was too large to keep: the
// object is parsed on its own.
void usage_from_fragment(std::string_view text, TokenUsage& usage) {
  for (size_t at = text.rfind("\"usage\""); at != std::string_view::npos;
       at = at == 0 ? std::string_view::npos : text.rfind("\"usage\"", at - 1)) {
    size_t open = text.find_first_not_of(" \t\r\n:", at + 7);
    if (open == std::string_view::npos || text[open] != '{') continue;
    int depth = 0;
    for (size_t i = open; i < text.size(); ++i) {
      if (text[i] == '{') ++depth;
      if (text[i] != '}' || --depth != 0) continue;
      auto object = nlohmann::json::parse(text.substr(open, i + 1 - open), nullptr, false);
      if (!object.is_discarded()) take_usage(nlohmann::json{{"usage", object}}, usage);
      break;
    }
    if (usage.any()) return;
  }
}

}  // namespace

UsageReader::UsageReader(std::string_view content_type) {
  std::string type = ascii_lower(content_type.substr(0, content_type.find(';')));
  if (type.find("text/event-stream") != std::string::npos)
    kind_ = Kind::events;
  else if (type.find("json") != std::string::npos)
    kind_ = Kind::json;
}

void UsageReader::feed(std::string_view body) {
  if (kind_ == Kind::none) return;
  if (kind_ == Kind::json) {
    size_t head = std::min(body.size(), kJsonEnd - std::min(kJsonEnd, text_.size()));
    text_.append(body.substr(0, head));
    body.remove_prefix(head);
    tail_.append(body);
    if (tail_.size() > 2 * kJsonEnd) tail_.erase(0, tail_.size() - kJsonEnd);
    return;
  }
  while (!body.empty()) {
    auto lf = body.find('\n');
    std::string_view piece = body.substr(0, lf);
    if (text_.size() + piece.size() <= kMaxEventLine)
      text_.append(piece);
    else
      overflowed_ = true;
    if (lf == std::string_view::npos) return;
    if (!overflowed_) read_event_line(text_);
    text_.clear();
    overflowed_ = false;
    body.remove_prefix(lf + 1);
  }
}

void UsageReader::read_event_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.rfind("data:", 0) != 0) return;
  line.remove_prefix(5);
  auto doc = nlohmann::json::parse(line, nullptr, false);
  if (!doc.is_discarded()) take_usage(doc, usage_);
}

TokenUsage UsageReader::finish() {
  if (kind_ == Kind::json && tail_.empty()) {
    auto doc = nlohmann::json::parse(text_, nullptr, false);
    if (!doc.is_discarded()) take_usage(doc, usage_);
  } else if (kind_ == Kind::json) {
    // Too large to keep whole: the usage object from either end, where APIs put it.
    if (tail_.size() > kJsonEnd) tail_.erase(0, tail_.size() - kJsonEnd);
    usage_from_fragment(tail_, usage_);
    if (!usage_.any()) usage_from_fragment(text_, usage_);
  } else if (kind_ == Kind::events && !text_.empty() && !overflowed_) {
    read_event_line(text_);
  }
  text_.clear();
  tail_.clear();
  return usage_;
}

}  // namespace belljar
