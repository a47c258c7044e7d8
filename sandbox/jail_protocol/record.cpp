#include "sandbox/jail_protocol/record.hpp"

#include <charconv>
#include <climits>

#include "sandbox/os/small_file.hpp"

namespace belljar {

namespace {

constexpr size_t kNameLengthBytes = 1, kValueLengthBytes = 4;

void put_length(std::string& out, uint32_t n) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
}

uint32_t get_length(std::string_view in) {
  uint32_t n = 0;
  for (size_t i = 0; i < kValueLengthBytes; ++i) n = (n << 8) | static_cast<unsigned char>(in[i]);
  return n;
}

std::string quoted(std::string_view name) {
  return "field \"" + std::string(name) + "\"";
}

// A signed decimal: an optional '-' then what parse_unsigned takes, within int64_t.
std::optional<int64_t> parse_signed(std::string_view text) {
  bool negative = !text.empty() && text[0] == '-';
  auto magnitude = parse_unsigned(negative ? text.substr(1) : text);
  if (!magnitude) return std::nullopt;
  if (negative) {
    if (*magnitude > static_cast<uint64_t>(INT64_MAX) + 1) return std::nullopt;
    return static_cast<int64_t>(0 - *magnitude);
  }
  if (*magnitude > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(*magnitude);
}

}  // namespace

RecordWriter& RecordWriter::text(std::string_view name, std::string_view value) {
  // Names are ours (string literals): a bad one is a programming error, caught by every test.
  if (name.empty() || name.size() > 255 || value.size() > UINT32_MAX) return *this;
  bytes_.push_back(static_cast<char>(name.size()));
  bytes_.append(name);
  put_length(bytes_, static_cast<uint32_t>(value.size()));
  bytes_.append(value);
  return *this;
}

RecordWriter& RecordWriter::number(std::string_view name, uint64_t value) {
  char digits[24];
  auto [end, error] = std::to_chars(digits, digits + sizeof digits, value);
  return text(name, std::string_view(digits, static_cast<size_t>(end - digits)));
}

RecordWriter& RecordWriter::signed_number(std::string_view name, int64_t value) {
  char digits[24];
  auto [end, error] = std::to_chars(digits, digits + sizeof digits, value);
  return text(name, std::string_view(digits, static_cast<size_t>(end - digits)));
}

RecordWriter& RecordWriter::texts(std::string_view name, const std::vector<std::string>& values) {
  for (const auto& value : values) text(name, value);
  return *this;
}

std::optional<Record> Record::parse(std::string_view bytes, RecordError* error) {
  Record record;
  size_t at = 0;
  while (at < bytes.size()) {
    size_t name_size = static_cast<unsigned char>(bytes[at]);
    if (name_size == 0) {
      if (error) *error = {"a field with an empty name at byte " + std::to_string(at)};
      return std::nullopt;
    }
    if (bytes.size() - at < kNameLengthBytes + name_size + kValueLengthBytes) {
      if (error) *error = {"the record ends inside a field's head at byte " + std::to_string(at)};
      return std::nullopt;
    }
    std::string_view name = bytes.substr(at + kNameLengthBytes, name_size);
    at += kNameLengthBytes + name_size;
    size_t value_size = get_length(bytes.substr(at, kValueLengthBytes));
    at += kValueLengthBytes;
    if (bytes.size() - at < value_size) {
      if (error) *error = {quoted(name) + " runs past the end of the record"};
      return std::nullopt;
    }
    record.fields_.push_back({name, bytes.substr(at, value_size)});
    at += value_size;
  }
  return record;
}

bool Record::has(std::string_view name) const {
  return text(name).has_value();
}

std::optional<std::string_view> Record::text(std::string_view name) const {
  for (const auto& field : fields_)
    if (field.name == name) return field.value;
  return std::nullopt;
}

std::vector<std::string_view> Record::all(std::string_view name) const {
  std::vector<std::string_view> values;
  for (const auto& field : fields_)
    if (field.name == name) values.push_back(field.value);
  return values;
}

std::string Record::required_text(std::string_view name) const {
  auto value = text(name);
  if (!value) throw RecordError{quoted(name) + " is missing"};
  return std::string(*value);
}

uint64_t Record::required_number(std::string_view name) const {
  auto value = text(name);
  if (!value) throw RecordError{quoted(name) + " is missing"};
  auto n = parse_unsigned(*value);
  if (!n) throw RecordError{quoted(name) + " is not an unsigned number"};
  return *n;
}

int64_t Record::required_signed(std::string_view name) const {
  auto value = text(name);
  if (!value) throw RecordError{quoted(name) + " is missing"};
  auto n = parse_signed(*value);
  if (!n) throw RecordError{quoted(name) + " is not a number"};
  return *n;
}

bool Record::required_flag(std::string_view name) const {
  uint64_t n = required_number(name);
  if (n > 1) throw RecordError{quoted(name) + " is not 0 or 1"};
  return n == 1;
}

uint64_t Record::number_or(std::string_view name, uint64_t fallback) const {
  return has(name) ? required_number(name) : fallback;
}

int64_t Record::signed_or(std::string_view name, int64_t fallback) const {
  return has(name) ? required_signed(name) : fallback;
}

bool Record::flag_or(std::string_view name, bool fallback) const {
  return has(name) ? required_flag(name) : fallback;
}

std::string Record::text_or(std::string_view name, std::string_view fallback) const {
  auto value = text(name);
  return std::string(value ? *value : fallback);
}

std::vector<std::string> Record::texts(std::string_view name) const {
  std::vector<std::string> values;
  for (auto value : all(name)) values.emplace_back(value);
  return values;
}

}  // namespace belljar
