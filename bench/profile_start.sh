#!/bin/sh
# Where belljar's start time goes: start -> first result of 1+1, taken apart.
#
#   bench/profile_start.sh [--reps N] [--isolation strict|none] [--no-strace]
#
# 1. Python start-up: `python3 -s -E -c pass` (the worker's flags) wall time, and what
#    `-X importtime` says the interpreter imports before any user code (site, encodings, ...).
# 2. The worker outside any sandbox, driven over fd 3 like the supervisor drives it: spawn ->
#    `hello` frame -> `done` of `1+1`, and the worker's own imports (`-X importtime`), before
#    and after `hello`.
# 3. The kernel through jupyter_client, with --audit-log: a timeline from start_kernel() to the
#    reply, cut at the audit records kernel_start (ZMQ sockets bound), worker_start (sandbox
#    built, worker spawned) and the cell's start (the worker said hello; the queued cell went
#    out), medians over N starts, for strict isolation and for --isolation none.
# 4. strace -f of one start (when strace is installed): when the supervisor binds its sockets,
#    builds the jail (unshare/clone/mount/pivot_root/seccomp) and execs Python, plus a syscall
#    count summary. strace slows every traced syscall: read 4 as "where", 3 as "how long".
#
# Uses /usr/bin/python3 only; BELLJAR overrides the binary (default build/belljar).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$here/profile_start.py" "$@"
