#include "sandbox/jail_protocol/jail_spec.hpp"

namespace belljar {

namespace {

const char* kind_name(JailBind::Kind kind) {
  switch (kind) {
    case JailBind::Kind::read_only:
      return "ro";
    case JailBind::Kind::workspace:
      return "workspace";
    case JailBind::Kind::device:
      return "device";
  }
  return "ro";
}

JailBind::Kind kind_from(const std::string& name) {
  if (name == "ro") return JailBind::Kind::read_only;
  if (name == "workspace") return JailBind::Kind::workspace;
  if (name == "device") return JailBind::Kind::device;
  throw RecordError{"field \"bind\": unknown kind \"" + name + "\""};
}

const char* mode_name(JailSpec::Mode mode) {
  return mode == JailSpec::Mode::namespaces ? "namespaces" : "landlock";
}

JailSpec::Mode mode_from(const std::string& name) {
  if (name == "namespaces") return JailSpec::Mode::namespaces;
  if (name == "landlock") return JailSpec::Mode::landlock;
  throw RecordError{"field \"mode\": unknown mode \"" + name + "\""};
}

// A nested record (a bind, a link, a file), parsed or refused naming its field.
Record nested(std::string_view bytes, const char* field) {
  RecordError error;
  auto record = Record::parse(bytes, &error);
  if (!record) throw RecordError{std::string("field \"") + field + "\": " + error.message};
  return *record;
}

// A uid or gid: 32 bits, and never (uid_t)-1, which the kernel reads as "unchanged".
uint32_t id_field(const Record& record, const char* field) {
  uint64_t value = record.required_number(field);
  if (value >= UINT32_MAX)
    throw RecordError{std::string("field \"") + field + "\" is out of range"};
  return static_cast<uint32_t>(value);
}

}  // namespace

std::string JailSpec::encode() const {
  RecordWriter out;
  out.number("protocol", kJailProtocolVersion)
      .text("mode", mode_name(mode))
      .flag("strict", strict)
      .flag("host_root", host_root)
      .number("host_uid", host_uid)
      .number("host_gid", host_gid)
      .text("workspace", workspace);
  for (const auto& b : binds)
    out.record("bind", RecordWriter()
                           .text("source", b.source)
                           .text("target", b.target)
                           .text("kind", kind_name(b.kind)));
  for (const auto& l : links)
    out.record("link", RecordWriter().text("path", l.path).text("points_to", l.points_to));
  out.texts("hide", hide_patterns)
      .texts("protect", protect_patterns)
      .texts("writable", writable_patterns)
      .flag("broker", broker)
      .number("workspace_quota_bytes", workspace_quota_bytes)
      .text("exec_path", exec_path)
      .texts("argv", argv)
      .texts("env", env);
  for (const auto& f : files)
    out.record("file", RecordWriter().text("path", f.path).text("text", f.text));
  out.number("memory_bytes", memory_bytes)
      .number("pids", pids)
      .number("file_size_bytes", file_size_bytes)
      .number("tmp_size_bytes", tmp_size_bytes)
      .number("open_files", open_files)
      .number("egress_port", egress_port);
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
  spec.mode = mode_from(record->required_text("mode"));
  spec.strict = record->required_flag("strict");
  spec.host_root = record->required_flag("host_root");
  spec.host_uid = id_field(*record, "host_uid");
  spec.host_gid = id_field(*record, "host_gid");
  spec.workspace = record->required_text("workspace");
  for (auto bytes : record->all("bind")) {
    Record b = nested(bytes, "bind");
    spec.binds.push_back(
        {b.required_text("source"), b.required_text("target"), kind_from(b.required_text("kind"))});
  }
  for (auto bytes : record->all("link")) {
    Record l = nested(bytes, "link");
    spec.links.push_back({l.required_text("path"), l.required_text("points_to")});
  }
  spec.hide_patterns = record->texts("hide");
  spec.protect_patterns = record->texts("protect");
  spec.writable_patterns = record->texts("writable");
  spec.broker = record->required_flag("broker");
  spec.workspace_quota_bytes = record->required_number("workspace_quota_bytes");
  spec.exec_path = record->required_text("exec_path");
  spec.argv = record->texts("argv");
  spec.env = record->texts("env");
  for (auto bytes : record->all("file")) {
    Record f = nested(bytes, "file");
    spec.files.push_back({f.required_text("path"), f.required_text("text")});
  }
  spec.memory_bytes = record->required_number("memory_bytes");
  spec.pids = record->required_number("pids");
  spec.file_size_bytes = record->required_number("file_size_bytes");
  spec.tmp_size_bytes = record->required_number("tmp_size_bytes");
  spec.open_files = record->required_number("open_files");
  uint64_t port = record->required_number("egress_port");
  if (port > 65535) throw RecordError{"field \"egress_port\" is out of range"};
  spec.egress_port = static_cast<uint16_t>(port);
  return spec;
}

}  // namespace belljar
