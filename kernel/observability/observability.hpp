#pragma once
// What the kernel tells its operator, made once and handed to every part that records: the
// metrics (--metrics), the audit log (--audit-log, or its fallback), and two rate-limited logs on
// stderr, of what clients can trigger (malformed requests, dropped comm messages) and of what the
// worker can (unknown, stale, refused frames). One object, so the order they are made in and the
// one tie between them (the audit log counts its own failures in the metrics) are written once.
//
// Threat: neither file may be one the sandbox can write (it could put a symlink in its place):
// both are refused at start when they are (host_files.hpp), and the kernel does not start.
#include <string>

#include "kernel/observability/audit_log.hpp"
#include "kernel/observability/diagnostics.hpp"
#include "kernel/observability/metrics.hpp"
#include "sandbox/policy/policy.hpp"

namespace belljar {

struct Observability {
  // Throws (the kernel refuses to start) when --metrics or --audit-log names a file the sandbox
  // may write, or one that can't be opened. Says on stderr, once, when the audit records go
  // there instead of where they were asked to (audit_destination.hpp).
  Observability(const Policy& policy, const std::string& session_id);

  // Before the audit log: a --metrics refused at start leaves no empty log file behind, and the
  // metrics the log counts its failures in outlive it.
  Metrics metrics;
  AuditLog audit;
  RateLimitedLog request_log{10};  // what clients can trigger
  RateLimitedLog frame_log{10};    // what the worker can trigger
};

}  // namespace belljar
