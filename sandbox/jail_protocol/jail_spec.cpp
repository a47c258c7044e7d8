#include "sandbox/jail_protocol/jail_spec.hpp"

#include <span>

namespace belljar {

namespace {

// How an enum travels: each value and its one name. A value outside the table is never written
// and a name outside it is never read.
template <typename Enum>
struct Spelling {
  Enum value;
  const char* name;
};

constexpr Spelling<JailSpec::Mode> kModes[] = {
    {JailSpec::Mode::namespaces, "namespaces"},
    {JailSpec::Mode::landlock, "landlock"},
};

constexpr Spelling<JailBind::Kind> kBindKinds[] = {
    {JailBind::Kind::read_only, "ro"},
    {JailBind::Kind::workspace, "workspace"},
    {JailBind::Kind::device, "device"},
};

std::span<const Spelling<JailSpec::Mode>> spellings(JailSpec::Mode) {
  return kModes;
}
std::span<const Spelling<JailBind::Kind>> spellings(JailBind::Kind) {
  return kBindKinds;
}

std::string quoted(std::string_view name) {
  return "field \"" + std::string(name) + "\"";
}

// A nested record (a bind, a link, a file), parsed or refused naming its field.
Record nested(std::string_view bytes, std::string_view field) {
  RecordError error;
  auto record = Record::parse(bytes, &error);
  if (!record) throw RecordError{quoted(field) + ": " + error.message};
  return *record;
}

// Writes each field of the list as its type says (jail_spec.hpp).
class FieldWriter {
 public:
  explicit FieldWriter(RecordWriter& out) : out_(out) {}

  void operator()(std::string_view name, bool value) { out_.flag(name, value); }
  void operator()(std::string_view name, uint64_t value) { out_.number(name, value); }
  void operator()(std::string_view name, uint32_t value) { out_.number(name, value); }
  void operator()(std::string_view name, uint16_t value) { out_.number(name, value); }
  void operator()(std::string_view name, const std::string& value) { out_.text(name, value); }
  void operator()(std::string_view name, const std::vector<std::string>& values) {
    out_.texts(name, values);
  }
  template <typename Enum>
  requires std::is_enum_v<Enum>
  void operator()(std::string_view name, Enum value) {
    for (const auto& spelling : spellings(value))
      if (spelling.value == value) {
        out_.text(name, spelling.name);
        return;
      }
    throw RecordError{quoted(name) + ": a value with no name"};
  }
  template <typename Nested>
  void operator()(std::string_view name, const std::vector<Nested>& items) {
    for (const auto& item : items) {
      RecordWriter fields;
      for_each_field(item, FieldWriter(fields));
      out_.record(name, fields);
    }
  }

 private:
  RecordWriter& out_;
};

// Reads each field of the list back, refusing what its type does not allow with the field named.
class FieldReader {
 public:
  explicit FieldReader(const Record& in) : in_(in) {}

  void operator()(std::string_view name, bool& value) { value = in_.required_flag(name); }
  void operator()(std::string_view name, uint64_t& value) { value = in_.required_number(name); }
  // A uid or gid: 32 bits, and never (uid_t)-1, which the kernel reads as "unchanged".
  void operator()(std::string_view name, uint32_t& value) {
    uint64_t number = in_.required_number(name);
    if (number >= UINT32_MAX) throw RecordError{quoted(name) + " is out of range"};
    value = static_cast<uint32_t>(number);
  }
  void operator()(std::string_view name, uint16_t& value) {
    uint64_t number = in_.required_number(name);
    if (number > UINT16_MAX) throw RecordError{quoted(name) + " is out of range"};
    value = static_cast<uint16_t>(number);
  }
  void operator()(std::string_view name, std::string& value) { value = in_.required_text(name); }
  void operator()(std::string_view name, std::vector<std::string>& values) {
    values = in_.texts(name);
  }
  template <typename Enum>
  requires std::is_enum_v<Enum>
  void operator()(std::string_view name, Enum& value) {
    std::string text = in_.required_text(name);
    for (const auto& spelling : spellings(value))
      if (text == spelling.name) {
        value = spelling.value;
        return;
      }
    throw RecordError{quoted(name) + ": unknown value \"" + text + "\""};
  }
  template <typename Nested>
  void operator()(std::string_view name, std::vector<Nested>& items) {
    for (auto bytes : in_.all(name)) {
      Record fields = nested(bytes, name);
      Nested item;
      try {
        for_each_field(item, FieldReader(fields));
      } catch (const RecordError& e) {
        throw RecordError{quoted(name) + ": " + e.message};
      }
      items.push_back(std::move(item));
    }
  }

 private:
  const Record& in_;
};

}  // namespace

std::string JailSpec::encode() const {
  RecordWriter out;
  out.number("protocol", kJailProtocolVersion);
  for_each_field(*this, FieldWriter(out));
  return out.bytes();
}

JailSpec JailSpec::decode(std::string_view bytes) {
  RecordError error;
  auto record = Record::parse(bytes, &error);
  if (!record) throw error;
  uint64_t protocol = record->required_number("protocol");
  if (protocol != kJailProtocolVersion)
    throw RecordError{"the kernel speaks jail protocol " + std::to_string(protocol) +
                      ", this helper " + std::to_string(kJailProtocolVersion) +
                      ": install belljar and belljar-jail from the same build"};
  JailSpec spec;
  for_each_field(spec, FieldReader(*record));
  return spec;
}

}  // namespace belljar
