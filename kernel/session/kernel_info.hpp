#pragma once
// The kernel's self-description: kernel_info_reply's content and the banner in it. The client is
// told what it runs in, as loudly as it matters: the sandbox's isolation and what this host could
// not enforce (the worker's notes, in the banner and as belljar.notes), no sandbox at all, active
// output run in the page, and an audit log that is failing (records lost; with --audit-required,
// cells refused). language_info is the supervisor's (worker_life.hpp): nothing the worker chose
// reaches the page but a well-formed version. Free functions of what they read, for the
// core to call with its parts.
#include <nlohmann/json.hpp>
#include <string>

#include "kernel/observability/audit_log.hpp"
#include "kernel/session/worker_life.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

// What the self-description reads: the policy, the worker's life (its language_info and the
// sandbox's notes), whether its Python can debug (hello's `debugger`), and the audit log.
struct KernelFacts {
  const Policy& policy;
  const WorkerLife& life;
  bool debugger;
  const AuditRecords& audit;
  const std::string& audit_destination;  // AuditLog::destination: a path, or "stderr"
  const std::string& audit_fallback;     // AuditLog::fallback: why on stderr; "" if not
};

// kernel_info_reply's content.
nlohmann::json kernel_info(const KernelFacts& facts);
// The banner: the sandbox's lines, then where the audit records go and whether they fail.
std::string banner(const KernelFacts& facts);
// The banner's first part: belljar's and Python's versions, and the sandbox (or its absence,
// what it lacks, active output not isolated).
std::string sandbox_banner(const Policy& policy, const WorkerLife& life);

}  // namespace belljar
