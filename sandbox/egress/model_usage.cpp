#include "sandbox/egress/model_usage.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace belljar {

namespace {

constexpr size_t kMaxJsonBody = 4u << 20;  // a chat answer is far smaller
constexpr size_t kMaxEventLine = 1u << 20;

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

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

UsageReader::UsageReader(std::string_view content_type) {
  std::string type = lower(content_type.substr(0, content_type.find(';')));
  if (type.find("text/event-stream") != std::string::npos)
    kind_ = Kind::events;
  else if (type.find("json") != std::string::npos)
    kind_ = Kind::json;
}

void UsageReader::feed(std::string_view body) {
  if (kind_ == Kind::none || overflowed_) return;
  if (kind_ == Kind::json) {
    if (text_.size() + body.size() > kMaxJsonBody) {
      overflowed_ = true;
      text_.clear();
      return;
    }
    text_.append(body);
    return;
  }
  while (!body.empty()) {
    auto lf = body.find('\n');
    std::string_view piece = body.substr(0, lf);
    if (text_.size() + piece.size() <= kMaxEventLine) text_.append(piece);
    if (lf == std::string_view::npos) return;
    read_event_line(text_);
    text_.clear();
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
  if (kind_ == Kind::json && !overflowed_) {
    auto doc = nlohmann::json::parse(text_, nullptr, false);
    if (!doc.is_discarded()) take_usage(doc, usage_);
  } else if (kind_ == Kind::events && !text_.empty()) {
    read_event_line(text_);
  }
  text_.clear();
  return usage_;
}

}  // namespace belljar
