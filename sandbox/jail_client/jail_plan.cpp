#include "sandbox/jail_client/jail_plan.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>

#include "sandbox/jail_client/environment.hpp"
#include "sandbox/jail_client/python_layout.hpp"
#include "sandbox/jail_client/worker_process.hpp"
#include "sandbox/layers/workspace_guard.hpp"

namespace belljar {
namespace fs = std::filesystem;

namespace {

// NAME=VALUE in `env`, replacing an entry of that name.
void set_variable(std::vector<std::string>& env, const std::string& name,
                  const std::string& value) {
  for (auto& entry : env)
    if (entry.compare(0, name.size() + 1, name + "=") == 0) {
      entry = name + "=" + value;
      return;
    }
  env.push_back(name + "=" + value);
}

bool covered_by(const fs::path& path, const std::vector<JailBind>& binds) {
  for (const auto& bind : binds) {
    if (bind.kind == JailBind::Kind::device) continue;
    auto rel = path.lexically_relative(bind.target);
    if (!rel.empty() && *rel.begin() != "..") return true;
  }
  return false;
}

// Adds a host path to the jail the way it is on the host: a symlink stays a symlink (its
// target then resolves inside the jail), a file or directory becomes a read-only bind.
void mirror(const std::string& path, JailSpec& spec) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    auto target = fs::read_symlink(path, ec);
    if (!ec) spec.links.push_back({path, target.string()});
    return;
  }
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return;
  if (covered_by(path, spec.binds)) return;
  spec.binds.push_back({path, path, JailBind::Kind::read_only});
}

void bind_read_only(const fs::path& path, JailSpec& spec) {
  if (covered_by(path, spec.binds)) return;
  spec.binds.push_back({path.string(), path.string(), JailBind::Kind::read_only});
}

std::string python_literal(const std::string& text) {
  std::string out = "'";
  for (unsigned char c : text) {
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

constexpr int kMaxLinkHops = 40;  // the kernel's own bound (ELOOP)

// Every symlink met resolving `path`, each where it stands (its folder resolved, the link not).
std::vector<fs::path> links_on_the_way(const fs::path& path) {
  std::vector<fs::path> links;
  std::deque<fs::path> ahead(path.begin(), path.end());
  fs::path at = "/";
  for (int hops = 0; !ahead.empty();) {
    fs::path part = ahead.front();
    ahead.pop_front();
    if (part.empty() || part == "." || part == "/") continue;
    if (part == "..") {
      at = at.parent_path();
      continue;
    }
    std::error_code ec;
    if (!fs::is_symlink(at / part, ec)) {
      at /= part;
      continue;
    }
    links.push_back(at / part);
    fs::path target = fs::read_symlink(at / part, ec);
    if (ec || ++hops > kMaxLinkHops) break;  // canonical() refuses the path for it anyway
    if (target.is_absolute()) at = "/";
    ahead.insert(ahead.begin(), target.begin(), target.end());
  }
  return links;
}

// The links on the way to an --ro part are protected names in both modes (no mount can hold a
// link's own name): renamed away, the name could be made again as an ordinary folder.
void protect_read_only_links(const Policy& policy, const fs::path& workspace, JailSpec& spec) {
  for (const auto& path : policy.read_only_given)
    for (auto& link : read_only_link_patterns(path, workspace))
      spec.protect_patterns.push_back(std::move(link));
}

}  // namespace

std::vector<std::string> read_only_link_patterns(const fs::path& path, const fs::path& workspace) {
  std::vector<std::string> patterns;
  for (const auto& link : links_on_the_way(fs::absolute(path))) {
    auto rel = link.lexically_relative(workspace);
    if (!rel.empty() && *rel.begin() != ".." && rel != ".")
      patterns.push_back("/" + rel.generic_string());
  }
  return patterns;
}

std::vector<std::string> worker_argv(const std::string& python, const std::string& package_dir) {
  return {python, "-s", "-E", "-c",
          "import sys; sys.path.insert(0, " + python_literal(package_dir) +
              "); from belljar_worker.main import serve; serve()"};
}

namespace {
bool is_within(const fs::path& path, const fs::path& dir) {
  auto rel = path.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// The kernel's own files (its connection file, and the runtime directory beside it) are never
// the sandbox's to read: in the workspace, their directory is masked like a secret (anchored
// at the workspace root); under anything else bound into the jail, the start is refused.
void guard_kernel_files(const Policy& policy, JailSpec& spec) {
  for (const auto& file : policy.kernel_files) {
    std::error_code ec;
    fs::path real = fs::weakly_canonical(file, ec);
    if (ec) real = file;
    if (is_within(real, spec.workspace)) {
      // Its directory (the runtime directory, other kernels' files beside it), or the file
      // alone when it lies at the workspace's top.
      fs::path dir = real.parent_path();
      fs::path guarded = dir == fs::path(spec.workspace) ? real : dir;
      spec.hide_patterns.push_back("/" + guarded.lexically_relative(spec.workspace).string());
      continue;
    }
    for (const auto& bind : spec.binds)
      if (bind.kind == JailBind::Kind::read_only && is_within(real, bind.source))
        throw SandboxError(bind.source + " is bound into the sandbox and holds the kernel's own " +
                           real.string() + ": keep the Jupyter runtime directory out of --ro");
  }
}

// Without a mount namespace nothing can be mounted over a secret, and Landlock only grants
// (it cannot carve a file out of the workspace it allows): a workspace holding one is refused.
void refuse_unmaskable_secrets(const JailSpec& spec) {
  auto secrets = find_secrets(spec.workspace, spec.hide_patterns);
  if (secrets.empty()) return;
  std::string named = secrets.front().relative + " (" + secrets.front().reason + ")";
  if (secrets.size() > 1) named += " and " + std::to_string(secrets.size() - 1) + " more";
  throw SandboxError("the workspace holds " + named +
                     ", which --isolation degraded cannot mask without a mount namespace: move "
                     "it out of the workspace, or run where namespaces are allowed");
}

// The policy's caps the jail enforces (the cgroup, tmpfs sizes, the worker's rlimits).
void carry_limits(const Policy& policy, JailSpec& spec) {
  spec.memory_bytes = policy.memory_bytes;
  spec.pids = policy.pids;
  spec.open_files = policy.open_files;
  spec.file_size_bytes = policy.file_size_bytes;
  spec.tmp_size_bytes = policy.tmp_size_bytes;
}

}  // namespace

std::pair<uid_t, gid_t> sandbox_host_ids(const Policy& policy) {
  if (::geteuid() != 0) return {::getuid(), ::getgid()};
  std::string user = policy.sandbox_user.empty() ? "nobody" : policy.sandbox_user;
  std::pair<uid_t, gid_t> ids;
  if (const passwd* pw = ::getpwnam(user.c_str())) {
    ids = {pw->pw_uid, pw->pw_gid};
  } else {
    char* end = nullptr;
    unsigned long uid = std::strtoul(user.c_str(), &end, 10);
    if (user.empty() || *end != '\0')
      throw SandboxError("--sandbox-user " + user + ": no such user");
    ids = {static_cast<uid_t>(uid), static_cast<gid_t>(uid)};
  }
  if (ids.first == 0) throw SandboxError("--sandbox-user " + user + ": code never runs as root");
  return ids;
}

JailSpec make_jail_spec(const Policy& policy, const WorkerLaunch& launch, JailSpec::Mode mode,
                        const char* const* host_env) {
  JailSpec spec;
  spec.mode = mode;
  spec.strict = policy.isolation == Isolation::strict;
  spec.host_root = ::geteuid() == 0;

  std::error_code ec;
  fs::path workspace =
      fs::canonical(policy.workspace.empty() ? fs::current_path() : policy.workspace, ec);
  if (ec) throw SandboxError("--workspace " + policy.workspace.string() + ": " + ec.message());
  if (!fs::is_directory(workspace))
    throw SandboxError("--workspace " + workspace.string() + ": not a directory");
  if (workspace == workspace.root_path())
    throw SandboxError("--workspace /: the whole filesystem cannot be the sandbox's workspace");
  for (const char* system : {"/proc", "/dev", "/sys"}) {
    auto rel = workspace.lexically_relative(system);
    if (!rel.empty() && *rel.begin() != "..")
      throw SandboxError("--workspace " + workspace.string() + ": inside " + system +
                         ", which the sandbox makes its own");
  }
  spec.workspace = workspace.string();

  auto [uid, gid] = sandbox_host_ids(policy);
  spec.host_uid = uid;
  spec.host_gid = gid;

  // The system: /usr read-only, the /lib* and /bin links mirrored, a minimal /etc.
  for (const char* dir : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"})
    mirror(dir, spec);
  for (const char* entry :
       {"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ssl",
        "/etc/ca-certificates", "/etc/pki", "/etc/fonts", "/etc/localtime", "/etc/timezone",
        "/etc/mime.types", "/etc/alternatives", "/etc/protocols", "/etc/services",
        "/etc/os-release", "/etc/debian_version", "/etc/matplotlibrc"})
    mirror(entry, spec);
  {
    fs::directory_iterator it("/etc", ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (name.rfind("python3", 0) == 0)
        mirror(it->path().string(), spec);  // Debian's sitecustomize
    }
    ec.clear();
  }

  const std::string python = launch.python.empty() ? policy.python : launch.python;
  PythonLayout layout = locate_python(python);
  for (const auto& prefix : layout.prefixes) bind_read_only(prefix, spec);
  spec.exec_path = layout.exec_path;

  fs::path package = fs::canonical(launch.worker_package_dir, ec);
  if (ec)
    throw SandboxError("worker package " + launch.worker_package_dir.string() + ": " +
                       ec.message());
  if (!fs::is_directory(package / "belljar_worker"))
    throw SandboxError("worker package " + package.string() +
                       ": no belljar_worker directory in it");
  bind_read_only(package, spec);

  for (const auto& path : policy.read_only) {
    fs::path real = fs::canonical(path, ec);
    if (ec) throw SandboxError("--ro " + path.string() + ": " + ec.message());
    if (real == real.root_path())
      throw SandboxError("--ro /: the whole filesystem cannot be bound");
    // A --ro path inside the workspace makes that part read-only; keep it even if "covered".
    auto rel = real.lexically_relative(workspace);
    if (!rel.empty() && *rel.begin() != "..")
      spec.binds.push_back({real.string(), real.string(), JailBind::Kind::read_only});
    else
      bind_read_only(real, spec);
  }
  spec.binds.push_back({spec.workspace, spec.workspace, JailBind::Kind::workspace});
  // Nothing bound may cover what the jail mounts itself (a prefix or --ro of /tmp, /home, ...).
  for (const auto& bind : spec.binds) {
    for (const char* own : {"/tmp", "/dev", "/proc", "/etc/passwd", kSandboxHome}) {
      auto rel = fs::path(own).lexically_relative(bind.target);
      if (!rel.empty() && *rel.begin() != "..")
        throw SandboxError((bind.kind == JailBind::Kind::workspace ? "--workspace " : "bind of ") +
                           bind.target + ": would cover the sandbox's own " + own +
                           "; choose a directory below it");
    }
  }
  for (const char* dev : {"null", "zero", "full", "random", "urandom"})
    spec.binds.push_back(
        {std::string("/dev/") + dev, std::string("/dev/") + dev, JailBind::Kind::device});

  spec.hide_patterns = default_hidden_patterns();
  spec.hide_patterns.insert(spec.hide_patterns.end(), policy.hide.begin(), policy.hide.end());
  guard_kernel_files(policy, spec);
  if (mode == JailSpec::Mode::landlock) refuse_unmaskable_secrets(spec);
  spec.protect_patterns = protected_patterns(policy);
  protect_read_only_links(policy, workspace, spec);
  spec.writable_patterns = policy.writable;
  // Off only by the policy's own flag, which the banner and kernel_info show: never by the
  // environment (issue 39, finding 11).
  spec.broker = !policy.bench_unbrokered_workspace;
  spec.workspace_quota_bytes = policy.workspace_quota_bytes;

  spec.argv = worker_argv(spec.exec_path, package.string());
  // The egress proxy's local end lives in the network namespace: none in landlock mode, where
  // seccomp refuses inet sockets altogether.
  if (mode == JailSpec::Mode::namespaces && !policy.allow_net.empty())
    spec.egress_port = kEgressPort;
  // In landlock mode there is no private home; the warden makes one and rewrites HOME.
  spec.env = sandbox_environment(policy, layout.bin_dirs, kSandboxHome, host_env, spec.egress_port);
  // Bound secrets: NAME is its placeholder (the policy refuses --pass-env or --set-env of it).
  // The CA bundle only where the proxy can be reached: a bundle path that does not exist
  // would break every TLS client in landlock mode for nothing.
  for (const auto& [name, placeholder] : launch.secret_placeholders)
    set_variable(spec.env, name, placeholder);
  if (spec.egress_port != 0 && !launch.ca_bundle.empty()) {
    spec.files.push_back({kCaBundlePath, launch.ca_bundle});
    for (const auto& [name, value] : ca_bundle_variables(kCaBundlePath))
      set_variable(spec.env, name, value);
  }
  carry_limits(policy, spec);
  return spec;
}

}  // namespace belljar
