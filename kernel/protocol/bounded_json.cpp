#include "kernel/protocol/bounded_json.hpp"

#include <cstdint>

namespace belljar {

namespace {
using json = nlohmann::json;

// A SAX pass that builds nothing: it measures the nesting depth and what the parsed value
// would cost in memory, and stops at the first limit passed. Only a text that passes is parsed
// for real, so `[{},{},...]` (16 MiB of text, hundreds of MiB as nlohmann values) costs a scan.
class Footprint : public nlohmann::json_sax<json> {
 public:
  // What one value costs once parsed (libstdc++ on 64-bit, allocator headers included): the
  // json slot itself; an object's map; a member's tree node and key; an array's vector growth;
  // a string's heap buffer past the small-string size.
  static constexpr uint64_t kValue = 16, kObject = 64, kMember = 96, kElement = 24, kString = 32;

  std::string why;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t& text) override { return value() && add(heap_string(text)); }
  bool binary(binary_t& bytes) override { return value() && add(bytes.size()); }
  bool start_object(std::size_t) override { return value() && add(kObject) && enter(false); }
  bool key(string_t& name) override { return add(kMember + heap_string(name)); }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t) override { return value() && add(kElement) && enter(true); }
  bool end_array() override { return leave(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    why = "malformed JSON";
    return false;
  }

 private:
  static uint64_t heap_string(const std::string& text) {
    return text.size() > 15 ? kString + text.size() : 0;
  }
  bool value() { return add(kValue + (in_array_ ? kElement : 0)); }
  bool add(uint64_t bytes) {
    bytes_ += bytes;
    if (bytes_ <= kMaxJsonFootprint) return true;
    why = "JSON whose parsed form would pass " + std::to_string(kMaxJsonFootprint >> 20) + " MiB";
    return false;
  }
  bool enter(bool array) {
    if (++depth_ > kMaxJsonDepth) {
      why = "JSON nested deeper than " + std::to_string(kMaxJsonDepth);
      return false;
    }
    arrays_.push_back(array);
    in_array_ = array;
    return true;
  }
  bool leave() {
    --depth_;
    arrays_.pop_back();
    in_array_ = !arrays_.empty() && arrays_.back();
    return true;
  }

  uint64_t bytes_ = 0;
  int depth_ = 0;
  bool in_array_ = false;
  std::vector<bool> arrays_;  // at most kMaxJsonDepth deep
};
}  // namespace

std::optional<nlohmann::json> parse_bounded_json(std::string_view text, std::string* why) {
  Footprint footprint;
  if (!json::sax_parse(text.begin(), text.end(), &footprint, json::input_format_t::json,
                       /*strict=*/true)) {
    if (why) *why = footprint.why.empty() ? "malformed JSON" : footprint.why;
    return std::nullopt;
  }
  auto value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
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
