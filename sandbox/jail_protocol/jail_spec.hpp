#pragma once
// Everything the jail's own processes (warden, init, worker) need, worked out by the
// supervisor (sandbox/jail_client/jail_plan.cpp) and sent to the jail helper as the first frame
// on its control socket (never argv: --set-env values may be secrets, and argv is
// world-readable in /proc). Encoded as a record (record.hpp): the helper links no JSON library.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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
};

struct JailLink {
  std::string path;       // inside the jail, e.g. /lib
  std::string points_to;  // e.g. usr/lib
};

// A file the jail's init writes into the new root before it turns read-only.
struct JailFile {
  std::string path;  // absolute, inside the jail
  std::string text;
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
  uint64_t open_files = 4096;
  // The egress proxy (egress_proxy.hpp): when egress_port is set, the supervisor passes the
  // sandbox's end of a SOCK_SEQPACKET pair to the warden as fd 5 (kEgressChannelFd), the warden
  // hands it to init through clone(), and init listens on 127.0.0.1:egress_port inside the
  // network namespace, passing each accepted connection over it (egress_forwarder.hpp).
  // 0: loopback only (no --allow-net, or no network namespace to listen in).
  uint16_t egress_port = 0;

  std::string encode() const;
  // Throws RecordError naming the field that is missing or malformed.
  static JailSpec decode(std::string_view bytes);
};

// The spec is sent once; a few thousand binds and a CA bundle stay far below this.
inline constexpr size_t kMaxSpecBytes = 64u << 20;

// The supervisor and the helper are built and installed together; the spec carries this so a
// helper from another build refuses it in one line instead of misreading it.
inline constexpr uint64_t kJailProtocolVersion = 2;  // 2: the debug channel, fd 6

}  // namespace belljar
