#pragma once
// The encoding of everything the supervisor and the jail helper say to each other: the
// JailSpec, the reports of the warden and of init, the supervisor's requests. The helper is a
// small static executable that links no JSON library (the supervisor's budget is 10 MB, the
// jail's 2 MB), so its messages are records: named fields in order, each a byte string, a
// name repeated for a list and a record nested in a field for a list of structures.
//
//   record := field*
//   field  := name-length (1 byte, 1..255) name value-length (4 bytes, big-endian) value
//
// Numbers travel as decimal text, read back strictly (no sign where none may be, no spaces,
// no overflow). Reading never trusts a length: a record that runs past its end, a name of
// length 0 or a value where a number must be is refused with one line saying which field.
// The bytes come from our own processes, but init lives inside the sandbox: what it writes is
// parsed as carefully as anything the worker writes.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace belljar {

class RecordWriter {
 public:
  RecordWriter& text(std::string_view name, std::string_view value);
  RecordWriter& number(std::string_view name, uint64_t value);
  RecordWriter& signed_number(std::string_view name, int64_t value);
  RecordWriter& flag(std::string_view name, bool value) { return number(name, value ? 1 : 0); }
  RecordWriter& texts(std::string_view name, const std::vector<std::string>& values);
  RecordWriter& record(std::string_view name, const RecordWriter& nested) {
    return text(name, nested.bytes());
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Why a record was refused: names the field, e.g. "field \"pids\": not a number".
struct RecordError {
  std::string message;
};

// A parsed record: views into the bytes it was parsed from, which must outlive it.
class Record {
 public:
  // The fields of `bytes`, or the reason they can't be read.
  static std::optional<Record> parse(std::string_view bytes, RecordError* error);

  bool has(std::string_view name) const;
  // The first value of `name`; every value of it, in order.
  std::optional<std::string_view> text(std::string_view name) const;
  std::vector<std::string_view> all(std::string_view name) const;

  // Typed readers. Each throws RecordError when the field is missing (for the required forms)
  // or holds something other than its type, so a decoder reads like the struct it fills.
  std::string required_text(std::string_view name) const;
  uint64_t required_number(std::string_view name) const;
  int64_t required_signed(std::string_view name) const;
  bool required_flag(std::string_view name) const;
  uint64_t number_or(std::string_view name, uint64_t fallback) const;
  int64_t signed_or(std::string_view name, int64_t fallback) const;
  bool flag_or(std::string_view name, bool fallback) const;
  std::string text_or(std::string_view name, std::string_view fallback) const;
  std::vector<std::string> texts(std::string_view name) const;

 private:
  struct Field {
    std::string_view name, value;
  };
  std::vector<Field> fields_;
};

}  // namespace belljar
