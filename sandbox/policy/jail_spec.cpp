#include "sandbox/policy/jail_spec.hpp"

namespace belljar {
using nlohmann::json;

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
  if (name == "workspace") return JailBind::Kind::workspace;
  if (name == "device") return JailBind::Kind::device;
  return JailBind::Kind::read_only;
}

}  // namespace

json JailSpec::to_json() const {
  json binds_json = json::array();
  for (const auto& b : binds)
    binds_json.push_back({{"source", b.source}, {"target", b.target}, {"kind", kind_name(b.kind)}});
  json links_json = json::array();
  for (const auto& l : links) links_json.push_back({{"path", l.path}, {"points_to", l.points_to}});
  json files_json = json::array();
  for (const auto& f : files) files_json.push_back({{"path", f.path}, {"text", f.text}});
  return {{"mode", mode == Mode::namespaces ? "namespaces" : "landlock"},
          {"strict", strict},
          {"host_root", host_root},
          {"host_uid", host_uid},
          {"host_gid", host_gid},
          {"workspace", workspace},
          {"binds", binds_json},
          {"links", links_json},
          {"hide_patterns", hide_patterns},
          {"protect_patterns", protect_patterns},
          {"workspace_quota_bytes", workspace_quota_bytes},
          {"exec_path", exec_path},
          {"argv", argv},
          {"env", env},
          {"memory_bytes", memory_bytes},
          {"pids", pids},
          {"file_size_bytes", file_size_bytes},
          {"tmp_size_bytes", tmp_size_bytes},
          {"open_files", open_files},
          {"egress_port", egress_port},
          {"files", files_json}};
}

JailSpec JailSpec::from_json(const json& doc) {
  JailSpec spec;
  spec.mode = doc.at("mode").get<std::string>() == "landlock" ? Mode::landlock : Mode::namespaces;
  spec.strict = doc.at("strict").get<bool>();
  spec.host_root = doc.at("host_root").get<bool>();
  spec.host_uid = doc.at("host_uid").get<uid_t>();
  spec.host_gid = doc.at("host_gid").get<gid_t>();
  spec.workspace = doc.at("workspace").get<std::string>();
  for (const auto& b : doc.at("binds"))
    spec.binds.push_back({b.at("source").get<std::string>(), b.at("target").get<std::string>(),
                          kind_from(b.at("kind").get<std::string>())});
  for (const auto& l : doc.at("links"))
    spec.links.push_back({l.at("path").get<std::string>(), l.at("points_to").get<std::string>()});
  spec.hide_patterns = doc.at("hide_patterns").get<std::vector<std::string>>();
  spec.protect_patterns = doc.at("protect_patterns").get<std::vector<std::string>>();
  spec.workspace_quota_bytes = doc.at("workspace_quota_bytes").get<uint64_t>();
  spec.exec_path = doc.at("exec_path").get<std::string>();
  spec.argv = doc.at("argv").get<std::vector<std::string>>();
  spec.env = doc.at("env").get<std::vector<std::string>>();
  spec.memory_bytes = doc.at("memory_bytes").get<uint64_t>();
  spec.pids = doc.at("pids").get<uint64_t>();
  spec.file_size_bytes = doc.at("file_size_bytes").get<uint64_t>();
  spec.tmp_size_bytes = doc.at("tmp_size_bytes").get<uint64_t>();
  spec.open_files = doc.at("open_files").get<uint64_t>();
  spec.egress_port = doc.at("egress_port").get<uint16_t>();
  for (const auto& f : doc.at("files"))
    spec.files.push_back({f.at("path").get<std::string>(), f.at("text").get<std::string>()});
  return spec;
}

}  // namespace belljar
