#pragma once
// Everything the jail's own processes (warden, init, worker) need, worked out by the
// supervisor (sandbox/jail_client/jail_plan.cpp) and sent to the jail helper as the first frame
// on its control socket (never argv: --set-env values may be secrets, and argv is
// world-readable in /proc). Encoded as a record (record.hpp): the helper links no JSON library.
// Its fields are listed once, in for_each_field below, which both the encoder and the decoder
// walk: a field cannot be sent without being read back, nor read under another name.
#include <sys/types.h>

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sandbox/jail_protocol/record.hpp"

namespace belljar {

// Inside the sandbox the code is uid/gid 1000 "sandbox"; the user namespace maps it to the
// sandbox user's host uid (root kernel) or to the kernel's own uid (unprivileged kernel).
inline constexpr uid_t kSandboxUid = 1000;
inline constexpr gid_t kSandboxGid = 1000;
inline constexpr const char* kSandboxUser = "sandbox";
inline constexpr const char* kSandboxHome = "/home/sandbox";
inline constexpr const char* kSandboxHostname = "belljar";
// The warden's descriptors: 0-3 are the worker's (stdin /dev/null, stdout, stderr, frames),
// 4 the control socket to the supervisor (spec in, reports out), 5 the egress channel (when
// the policy allows any host): the sandbox's end of the SOCK_SEQPACKET pair to the proxy, 6
// the worker's debug channel (always), which init hands on and the worker gets as fd 4
// (kWorkerDebugFd; worker_exec.cpp).
inline constexpr int kControlFd = 4;
inline constexpr int kEgressChannelFd = 5;
inline constexpr int kDebugChannelFd = 6;
inline constexpr int kWorkerDebugFd = 4;
// The egress proxy's port inside: HTTP_PROXY=http://127.0.0.1:3128. The sandbox has a network
// namespace of its own, so the port is free whatever the host runs.
inline constexpr uint16_t kEgressPort = 3128;

struct JailBind {
  enum class Kind { read_only, workspace, device };
  std::string source;  // host path, symlinks resolved
  std::string target;  // path inside the jail
  Kind kind = Kind::read_only;
  bool operator==(const JailBind&) const = default;
};

struct JailLink {
  std::string path;       // inside the jail, e.g. /lib
  std::string points_to;  // e.g. usr/lib
  bool operator==(const JailLink&) const = default;
};

// A file the jail's init writes into the new root before it turns read-only.
struct JailFile {
  std::string path;  // absolute, inside the jail
  std::string text;
  bool operator==(const JailFile&) const = default;
};

// Where the bound secrets' CA bundle is, inside (SSL_CERT_FILE and friends name it).
inline constexpr const char* kCaBundlePath = "/etc/belljar/ca-bundle.pem";

struct JailSpec {
  enum class Mode {
    namespaces,  // the full jail: user/mount/pid/net/ipc/uts/cgroup namespaces, pivot_root
    landlock,    // degraded: no namespaces; Landlock, seccomp (no inet) and rlimits
  };
  Mode mode = Mode::namespaces;
  bool strict = true;      // a layer that fails is an error rather than a note
  bool host_root = false;  // the warden runs as host uid 0
  uid_t host_uid = 0;      // the host identity the code runs as
  gid_t host_gid = 0;
  std::string workspace;        // absolute, resolved; mounted at the same path
  std::vector<JailBind> binds;  // system dirs, /etc files, interpreter, worker package, --ro
  std::vector<JailLink> links;  // /lib -> usr/lib and the like, mirrored from the host
  std::vector<std::string> hide_patterns;      // defaults + --hide
  std::vector<std::string> protect_patterns;   // defaults - --writable + --protect
  std::vector<std::string> writable_patterns;  // --writable: opened despite the workspace rule
  // The workspace broker decides every change to a name (jail/workspace_broker.hpp). Off only
  // for bench/workspace.py's comparison (the policy flag --bench-unbrokered-workspace), said in
  // the kernel's notes.
  bool broker = true;
  uint64_t workspace_quota_bytes = 0;  // 0: none
  std::string exec_path;               // the interpreter as the jail sees it
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=VALUE, built from the allowlist
  std::vector<JailFile> files;   // namespaces mode only: the CA bundle for bound secrets
  uint64_t memory_bytes = 0;
  uint64_t pids = 0;
  uint64_t file_size_bytes = 0;
  uint64_t tmp_size_bytes = 0;
  uint64_t open_files = 0;  // RLIMIT_NOFILE, from --open-files (the policy holds its default)
  // The egress proxy (egress_proxy.hpp): when egress_port is set, the supervisor passes the
  // sandbox's end of a SOCK_SEQPACKET pair to the warden as fd 5 (kEgressChannelFd), the warden
  // hands it to init through clone(), and init listens on 127.0.0.1:egress_port inside the
  // network namespace, passing each accepted connection over it (egress_forwarder.hpp).
  // 0: loopback only (no --allow-net, or no network namespace to listen in).
  uint16_t egress_port = 0;

  std::string encode() const;
  // Throws RecordError naming the field that is missing or malformed.
  static JailSpec decode(std::string_view bytes);
  bool operator==(const JailSpec&) const = default;
};

// The one list of the spec's fields, in the order they are written, each under its record name.
// The encoder and the decoder (jail_spec.cpp) both walk it, so a field added to JailSpec is
// added here, once; the unit test counts this list against the struct's members. A field's
// kind is its type: bool a flag, uint64_t a number, uint32_t a uid or gid (32 bits, never
// (uid_t)-1), uint16_t a port, a string a text, strings a repeated text, an enum one of the
// names its table spells, a vector of JailBind/JailLink/JailFile a nested record per element.
// Every field but a repeated one is required: a spec cut short anywhere is refused.
template <typename Spec, typename Visit>
requires std::same_as<std::remove_const_t<Spec>, JailSpec>
void for_each_field(Spec& spec, Visit&& visit) {
  visit("mode", spec.mode);
  visit("strict", spec.strict);
  visit("host_root", spec.host_root);
  visit("host_uid", spec.host_uid);
  visit("host_gid", spec.host_gid);
  visit("workspace", spec.workspace);
  visit("bind", spec.binds);
  visit("link", spec.links);
  visit("hide", spec.hide_patterns);
  visit("protect", spec.protect_patterns);
  visit("writable", spec.writable_patterns);
  visit("broker", spec.broker);
  visit("workspace_quota_bytes", spec.workspace_quota_bytes);
  visit("exec_path", spec.exec_path);
  visit("argv", spec.argv);
  visit("env", spec.env);
  visit("file", spec.files);
  visit("memory_bytes", spec.memory_bytes);
  visit("pids", spec.pids);
  visit("file_size_bytes", spec.file_size_bytes);
  visit("tmp_size_bytes", spec.tmp_size_bytes);
  visit("open_files", spec.open_files);
  visit("egress_port", spec.egress_port);
}

template <typename Bind, typename Visit>
requires std::same_as<std::remove_const_t<Bind>, JailBind>
void for_each_field(Bind& bind, Visit&& visit) {
  visit("source", bind.source);
  visit("target", bind.target);
  visit("kind", bind.kind);
}

template <typename Link, typename Visit>
requires std::same_as<std::remove_const_t<Link>, JailLink>
void for_each_field(Link& link, Visit&& visit) {
  visit("path", link.path);
  visit("points_to", link.points_to);
}

template <typename File, typename Visit>
requires std::same_as<std::remove_const_t<File>, JailFile>
void for_each_field(File& file, Visit&& visit) {
  visit("path", file.path);
  visit("text", file.text);
}

// The spec is sent once; a few thousand binds and a CA bundle stay far below this.
inline constexpr size_t kMaxSpecBytes = 64u << 20;

// The supervisor and the helper are built and installed together; the spec carries this so a
// helper from another build refuses it in one line instead of misreading it.
inline constexpr uint64_t kJailProtocolVersion = 2;  // 2: the debug channel, fd 6

}  // namespace belljar
