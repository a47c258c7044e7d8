#pragma once
// The supervisor's plan for a jail: the policy worked out against this host (the workspace and
// --ro paths resolved, the interpreter's prefixes found, the system directories mirrored, the
// environment built) into the JailSpec the warden receives.
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

struct WorkerLaunch;  // worker_process.hpp

// The supervisor's half: resolves paths, the interpreter and the environment. Throws
// SandboxError for what cannot work (no interpreter, a workspace of "/", ...).
JailSpec make_jail_spec(const Policy& policy, const WorkerLaunch& launch, JailSpec::Mode mode,
                        const char* const* host_env);

// The host uid and gid the sandbox's code runs and writes as: the kernel's own, or, for a kernel
// run as root, --sandbox-user's (nobody by default). Throws SandboxError for an unknown user or
// root.
std::pair<uid_t, gid_t> sandbox_host_ids(const Policy& policy);

// `python -s -E -c "import sys; sys.path.insert(0, '<dir>'); from belljar_worker.main import
// serve; serve()"`, with <dir> quoted as a Python string literal.
std::vector<std::string> worker_argv(const std::string& python, const std::string& package_dir);

// Every symlink inside `workspace` (canonical) met on the way to an --ro path (`path`, absolute
// or from the current folder), as anchored protect patterns ("/lnk"): the read-only mount goes
// on what the path resolves to, and a link's own name left free could be renamed away and made
// again as an ordinary folder, which the host then reads under the name it gave (the outside
// pass's B2). The links are found as the kernel would follow them, one component at a time.
std::vector<std::string> read_only_link_patterns(const std::filesystem::path& path,
                                                 const std::filesystem::path& workspace);

}  // namespace belljar
