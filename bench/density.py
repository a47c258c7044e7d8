#!/usr/bin/python3
"""Many sessions on one host: belljar vs ipykernel, side by side, in one run.

    /usr/bin/python3 bench/density.py                # full run (~10 min on 2 cores), writes bench/DENSITY.md
    /usr/bin/python3 bench/density.py --quick        # N = 3, 6 and a 2,000-cell session: a smoke check
    /usr/bin/python3 bench/density.py --sizes 10,25 --cells plain --skip long --output -

For each N and each cell kind, N kernels of one kind are started at once and each is sent one
cell the moment its process exists; then they idle, their process trees are measured (PSS, RSS,
the machine's MemAvailable), and all are shut down. belljar and ipykernel alternate batch by
batch. A long session (20,000 cells of `print(1)`) shows whether the supervisor stays flat.
bench/README.md ("Density") explains the method figure by figure.
"""
import argparse
import datetime
import os
import pathlib
import signal
import statistics
import sys
import time
import uuid

import psutil
import zmq
from jupyter_client.connect import LocalPortCache, write_connection_file
from jupyter_client.launcher import launch_kernel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from profile_start import audit_records, parse_ts  # noqa: E402  (belljar's audit timeline)

import bench  # noqa: E402  (the lean client, kernelspecs, memory, formatting, machine facts)
from bench import fmt_mb, fmt_ratio, fmt_s, log, median, p99  # noqa: E402

HERE = bench.HERE
IP = "127.0.0.1"
PORTS = ("shell_port", "iopub_port", "stdin_port", "hb_port", "control_port")
KERNELS = ("belljar", "ipykernel")
# cell kind -> (code, user expression checked in the reply, its expected text/plain)
CELLS = {
    "plain": ("1+1", "1+1", "2"),
    "numpy": ("import numpy; int(numpy.arange(10).sum())", "int(numpy.arange(10).sum())", "45"),
}
SIZES, QUICK_SIZES = (10, 25, 50), (3, 6)
LONG_CELLS, QUICK_LONG_CELLS = 20_000, 2_000
IDLE = 2.0                 # seconds the sessions idle between their first result and the measurement
START_TIMEOUT = 300        # seconds for every session of a batch to answer
SHUTDOWN_TIMEOUT = 60      # seconds for every process of a batch to be gone (then SIGKILL)
AFTER_SHUTDOWN = 1.0       # MemAvailable is read this long after the last exit (see README)
SETTLE_MIN, SETTLE_MAX, SETTLE_CPU = 2.0, 15.0, 50.0   # between batches: see settle()
QUICK_SETTLE_MAX = 4.0
TARGETS = {"pss_slope": 0.2, "p99": 0.15, "growth": 2e6}


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def settle(longest=SETTLE_MAX):
    """Lets the machine settle between batches: at least SETTLE_MIN s, then until the whole
    machine's CPU use over 0.5 s falls under SETTLE_CPU % (the previous batch's exits, namespace
    teardown, page reclaim), at most `longest` s. Returns the last CPU % seen (other work on the
    machine keeps it up: the report shows it per batch)."""
    time.sleep(SETTLE_MIN)
    deadline = time.monotonic() + longest - SETTLE_MIN
    while True:
        busy = psutil.cpu_percent(interval=0.5)
        if busy < SETTLE_CPU or time.monotonic() > deadline:
            return busy


def gone(proc):
    """True once a psutil.Process has exited (a zombie counts: it holds no memory)."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# ---------------------------------------------------------------------------------------------
# sessions: each kernel started the way jupyter_client's LocalProvisioner starts one (ports from
# LocalPortCache, write_connection_file, launch_kernel with the kernelspec's argv), without a
# KernelManager around it: the harness's own cost per kernel is small, and equal for both kinds.


class Session:
    """One kernel process the harness started, its lean client and what was measured of it."""

    def __init__(self, bench_, kernel, tag, cell):
        code, expr, expected = CELLS[cell]
        self.kernel, self.tag, self.expected, self.cell = kernel, tag, expected, cell
        self.reply = self.t_reply = self.t_gone = None
        self.procs = []          # psutil.Process of the whole tree, as last seen
        self.client = self.proc = self.stderr = None
        self.wall0 = time.time()
        self.t0 = time.perf_counter()
        lpc = LocalPortCache.instance()
        self.ports = {name: lpc.find_available_port(IP) for name in PORTS}
        self.connection_file = str(bench_.runtime / ("kernel-%s.json" % tag))
        _, self.info = write_connection_file(self.connection_file, ip=IP,
                                             key=uuid.uuid4().hex.encode(), **self.ports)
        spec = bench_.kernelspec(kernel)
        argv = [a.replace("{connection_file}", self.connection_file) for a in spec["argv"]]
        self.log = bench_.tmp / "logs" / ("%s.stderr" % tag)
        self.stderr = open(self.log, "wb")
        # launch_kernel: start_new_session, JPY_PARENT_PID, stdin a closed pipe (as jupyter_client)
        self.proc = launch_kernel(argv, stderr=self.stderr, env=dict(bench_.env),
                                  cwd=str(bench_.workspace))
        self.client = bench.Client(self.info, bench_.ctx, channels=("shell",))
        self.msg_id = self.client.execute(code, user_expressions={"r": expr})
        self.t_spawned = time.perf_counter() - self.t0

    @property
    def shell(self):
        return self.client.sockets["shell"]

    def take_reply(self, msg, now):
        if msg and msg["parent_header"].get("msg_id") == self.msg_id:
            self.reply, self.t_reply = msg, now - self.t0
            return True
        return False

    def check(self):
        bench.check_value(self.reply, self.expected, what=self.cell)

    def snapshot(self):
        """The process tree now (kept, so exits can be watched after the kernel is gone)."""
        procs = bench.tree(self.proc.pid)
        known = {p.pid for p in procs}
        self.procs = procs + [p for p in self.procs if p.pid not in known and not gone(p)]
        return procs

    def alive(self):
        if self.proc.poll() is None:
            return True
        return any(not gone(p) for p in self.procs[1:])

    def shutdown_request(self, ctx):
        if "control" not in self.client.sockets:
            control = bench.Client(self.info, ctx, channels=("control",))
            self.client.sockets["control"] = control.sockets.pop("control")
        self.client.send("control", "shutdown_request", {"restart": False})

    def kill(self):
        """SIGKILL every process of the tree still there, by pid (psutil checks it is the same
        process), then reap the kernel process."""
        if self.proc is None:
            return
        try:
            procs = self.snapshot()
        except Exception:  # noqa: BLE001
            procs = self.procs
        for p in [*procs, *self.procs]:
            try:
                p.kill()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        try:
            self.proc.wait(5)
        except Exception:  # noqa: BLE001
            pass

    def close(self):
        if self.client:
            self.client.close()
            self.client = None
        if self.stderr:
            self.stderr.close()
            self.stderr = None
        lpc = LocalPortCache.instance()
        for port in self.ports.values():
            lpc.return_port(port)
        self.ports = {}
        try:
            os.unlink(self.connection_file)
        except OSError:
            pass

    def audit_log(self, bench_):
        """This kernel's audit file, the default's, in the bench's state directory: the one whose
        kernel_start names this kernel's process."""
        for path in (bench_.state / "belljar").glob("audit-*.jsonl"):
            for r in audit_records(path):
                if r.get("event") == "kernel_start":
                    if r.get("pid") == self.proc.pid:
                        return path
                    break
        return None

    def audit_phases(self, bench_):
        """belljar's start taken apart with its audit records (the default's file per kernel,
        in the state directory): seconds from the session's start to worker_start
        (the supervisor is up and has forked the warden), to the cell's start (warden and init
        built the sandbox, the worker's Python came up and said hello, the queued request went
        to it), to the cell's end, and on to the reply at the client."""
        recs = {}
        path = self.audit_log(bench_)
        for r in audit_records(path) if path else ():
            recs.setdefault(r.get("event"), r)
        try:
            worker = parse_ts(recs["worker_start"]["ts"]) - self.wall0
            start = parse_ts(recs["cell"]["start"]) - self.wall0
            end = parse_ts(recs["cell"]["ts"]) - self.wall0
        except (KeyError, ValueError, TypeError):
            return None
        return {"to_worker_start": worker, "worker_to_cell": start - worker,
                "cell": end - start, "end_to_reply": self.t_reply - end}


class Fleet:
    """Every session started, so that all are killed whatever happens (Ctrl-C, an exception)."""

    def __init__(self):
        self.sessions = []

    def add(self, session):
        self.sessions.append(session)

    def release(self, sessions):
        for s in sessions:
            s.kill()
            s.close()
        ids = {id(s) for s in sessions}
        self.sessions = [s for s in self.sessions if id(s) not in ids]

    def kill_all(self):
        self.release(list(self.sessions))


def start_sessions(bench_, fleet, kernel, n, cell, tag):
    """Starts n sessions back to back, each sent its cell at once; collects every first reply.
    Replies that arrive while later sessions are being spawned are taken between spawns, so a
    session's time is its own start -> its reply, within one spawn (a few ms)."""
    poller = zmq.Poller()
    pending = {}

    def collect(timeout_ms):
        for sock, _ in poller.poll(timeout_ms):
            s = pending[sock]
            msg = s.client.recv("shell", 0)
            if s.take_reply(msg, time.perf_counter()):
                poller.unregister(sock)
                del pending[sock]

    sessions = []
    t_batch = time.perf_counter()
    for i in range(n):
        s = Session(bench_, kernel, "%s-%d" % (tag, i), cell)
        fleet.add(s)
        sessions.append(s)
        pending[s.shell] = s
        poller.register(s.shell, zmq.POLLIN)
        collect(0)
    t_spawned = time.perf_counter() - t_batch
    deadline = time.monotonic() + START_TIMEOUT
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError("%d of %d %s sessions did not answer in %d s"
                               % (len(pending), n, kernel, START_TIMEOUT))
        collect(100)
        for s in list(pending.values()):
            if s.proc.poll() is not None:
                raise RuntimeError("%s session %s exited (%s) before answering; stderr:\n%s" % (
                    kernel, s.tag, s.proc.returncode, tail(s.log)))
    for s in sessions:
        s.check()
    t_last = max(s.t0 + s.t_reply for s in sessions) - t_batch
    return sessions, t_spawned, t_last


def tail(path, lines=12):
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def shut_down(sessions, ctx):
    """shutdown_request on control to every session (what KernelManager.shutdown_kernel(now=False)
    sends first), then seconds until every process of every tree is gone, polled every 5 ms.
    Trees still there after SHUTDOWN_TIMEOUT are SIGKILLed; returns (seconds, how many)."""
    for s in sessions:
        s.snapshot()
    t0 = time.perf_counter()
    for s in sessions:
        s.shutdown_request(ctx)
    left = list(sessions)
    while left and time.perf_counter() - t0 < SHUTDOWN_TIMEOUT:
        still = []
        for s in left:
            if s.alive():
                still.append(s)
            else:
                s.t_gone = time.perf_counter() - t0
        left = still
        if left:
            time.sleep(0.005)
    elapsed = time.perf_counter() - t0
    for s in left:
        s.kill()
    return elapsed, len(left)


# ---------------------------------------------------------------------------------------------
# one batch: N at once, idle, measure, shut down


def batch(bench_, fleet, kernel, n, cell, idle, settle_max):
    busy = settle(settle_max)
    load = os.getloadavg()[0]
    avail_before = mem_available()
    cpu0 = psutil.Process().cpu_times()
    tag = "%s-%s-n%d" % (kernel, cell, n)
    log("  %s: %d at once, cell %s (machine CPU %.0f%%, load %.2f)" % (kernel, n, cell, busy, load))
    try:
        sessions, t_spawned, t_last = start_sessions(bench_, fleet, kernel, n, cell, tag)
        cpu1 = psutil.Process().cpu_times()
        time.sleep(idle)
        total = {"rss": 0, "pss": 0, "uss": 0}
        roles, unreadable, per_session = {}, [], []
        for s in sessions:
            mem = bench.memory_of(s.snapshot())
            entries = bench.label_roles(mem["procs"], kernel)
            unreadable += mem["unreadable"]
            for key in total:
                total[key] += mem[key]
            for e in entries:
                r = roles.setdefault(e["role"], {"rss": 0, "pss": 0, "uss": 0, "count": 0})
                for key in ("rss", "pss", "uss"):
                    r[key] += e[key]
                r["count"] += 1
            per_session.append({"tag": s.tag, "spawn_s": s.t_spawned, "first_result_s": s.t_reply,
                                "pss": mem["pss"], "rss": mem["rss"], "procs": len(entries)})
        avail_idle = mem_available()
        sup_maps = None
        if kernel == "belljar":
            try:
                sup_maps = bench.mappings(sessions[0].proc.pid)
            except OSError:
                pass
        t_shutdown, killed = shut_down(sessions, bench_.ctx)
        for s, rec in zip(sessions, per_session):
            rec["gone_s"] = s.t_gone
        time.sleep(AFTER_SHUTDOWN)
        avail_after = mem_available()
    finally:
        fleet.kill_all()  # this batch's sessions (one batch at a time), also those of a failed start
    phases = None
    if kernel == "belljar":
        phases = [s.audit_phases(bench_) for s in sessions]
        for rec, ph in zip(per_session, phases):
            rec["phases"] = ph
    times = [s.t_reply for s in sessions]
    return {
        "kernel": kernel, "cell": cell, "n": n, "machine_cpu_percent": busy, "load1": load,
        "first_p50": median(times), "first_p99": p99(times), "first_max": max(times),
        "last_from_batch": t_last, "spawn_all_s": t_spawned,
        "spawn_median_s": median([s.t_spawned for s in sessions]),
        "harness_cpu_s": (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system),
        "pss": total["pss"], "rss": total["rss"], "uss": total["uss"], "roles": roles,
        "unreadable": unreadable, "avail_before": avail_before, "avail_idle": avail_idle,
        "avail_after": avail_after, "shutdown_s": t_shutdown, "killed": killed,
        "sessions": per_session, "supervisor_mappings": sup_maps,
    }


def warm_up(bench_, fleet, kernels):
    """One session of each kernel with the numpy cell: page cache, .pyc, ~/.ipython."""
    for k in kernels:
        sessions, _, _ = start_sessions(bench_, fleet, k, 1, "numpy", "warm-%s" % k)
        shut_down(sessions, bench_.ctx)
        fleet.kill_all()


# ---------------------------------------------------------------------------------------------
# the long session


def checkpoints(total):
    return sorted({max(1, total // 20), total // 4, total // 2, total})


def long_session(bench_, fleet, kernel, total):
    """One session runs `total` cells of print(1), each awaited (reply and idle) before the next;
    the kernel process's RSS/PSS (and the tree's PSS) at the checkpoints, after 0.2 s of quiet."""
    sessions, _, _ = start_sessions(bench_, fleet, kernel, 1, "plain", "long-%s" % kernel)
    s = sessions[0]
    client = bench.Client(s.info, bench_.ctx)
    points = []
    try:
        client.settle()
        marks = checkpoints(total)
        t0 = time.perf_counter()
        paused = 0.0  # the pauses at the checkpoints are not cell time
        for i in range(1, total + 1):
            reply, _, _ = client.run("print(1)")
            if reply["content"].get("status") != "ok":
                raise RuntimeError("print(1) failed in cell %d: %s" % (i, reply["content"]))
            if i in marks:
                t_mark = time.perf_counter()
                elapsed = t_mark - t0 - paused
                time.sleep(0.2)
                procs = s.snapshot()
                mem = bench.memory_of(procs)
                sup = bench.memory_of(procs[:1])
                point = {"cells": i, "elapsed_s": elapsed, "kernel_rss": sup["rss"],
                         "kernel_pss": sup["pss"], "tree_pss": mem["pss"], "tree_rss": mem["rss"]}
                if i in (marks[0], marks[-1]):
                    try:
                        point["mappings"] = bench.mappings(s.proc.pid)
                    except OSError:
                        pass
                points.append(point)
                log("  %s: %d cells, kernel process RSS %s PSS %s" % (
                    kernel, i, fmt_mb(sup["rss"]), fmt_mb(sup["pss"])))
                paused += time.perf_counter() - t_mark
        shut_down(sessions, bench_.ctx)
    finally:
        client.close()
        fleet.kill_all()
    return points


# ---------------------------------------------------------------------------------------------
# figures and the report


def slope(xs, ys):
    """Least-squares slope of ys against xs (None with fewer than two points)."""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(x for x, _ in pts)
    my = statistics.fmean(y for _, y in pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def end_slope(xs, ys):
    """(y(last) - y(first)) / (x(last) - x(first)): the cost of one more session."""
    if len(xs) < 2 or ys[0] is None or ys[-1] is None:
        return None
    return (ys[-1] - ys[0]) / (xs[-1] - xs[0])


FIGURES = [
    # key, label, formatter, how it is derived from a batch
    ("first_p50", "first result, p50 per session", fmt_s, lambda b: b["first_p50"]),
    ("first_p99", "first result, p99 per session", fmt_s, lambda b: b["first_p99"]),
    ("first_max", "first result, slowest session", fmt_s, lambda b: b["first_max"]),
    ("last", "last first result, from the batch's start", fmt_s, lambda b: b["last_from_batch"]),
    ("pss", "total PSS of all trees, idle", fmt_mb, lambda b: b["pss"]),
    ("pss_each", "PSS per session (total ÷ N)", fmt_mb, lambda b: b["pss"] / b["n"]),
    ("rss", "total RSS of all trees, idle", fmt_mb, lambda b: b["rss"]),
    ("avail_drop", "MemAvailable: before − idle", fmt_mb,
     lambda b: b["avail_before"] - b["avail_idle"]),
    ("shutdown", "shutdown → every process gone", fmt_s, lambda b: b["shutdown_s"]),
]


def fmt_signed_mb(x):
    return "—" if x is None else "%+.1f MB" % (x / 1e6)


def fmt_slope(fmt, x):
    if x is None:
        return "—"
    if fmt is fmt_s:
        return "%+.1f ms" % (x * 1e3)
    return "%+.2f MB" % (x / 1e6)


def build_report(result, info, notes, quick):
    batches = result["batches"]
    sizes, cells, kernels = info["sizes"], info["cells"], info["kernels"]
    by = {(b["kernel"], b["cell"], b["n"]): b for b in batches}

    def series(kernel, cell, fn):
        return [fn(by[(kernel, cell, n)]) if (kernel, cell, n) in by else None for n in sizes]

    def fig(kernel, cell, key):
        fn = {f[0]: f[3] for f in FIGURES}[key]
        return series(kernel, cell, fn)

    n_max, n_min = sizes[-1], sizes[0]
    bj, ipk = "belljar", "ipykernel"

    # -- targets
    rows = []
    for cell in cells:
        target = cell == "plain"
        s_bj = end_slope(sizes, fig(bj, cell, "pss")) if bj in kernels else None
        s_ipk = end_slope(sizes, fig(ipk, cell, "pss")) if ipk in kernels else None
        rows.append(bench.Row("D1" if target else "D1b",
                              "PSS per additional idle session, cell `%s` (N = %d → %d)"
                              % (cell, n_min, n_max), s_bj, s_ipk, fmt_mb,
                              TARGETS["pss_slope"] if target else None,
                              "profile: \"belljar's PSS by process\" below"))
    for cell in cells:
        target = cell == "plain"
        b1, b2 = by.get((bj, cell, n_max)), by.get((ipk, cell, n_max))
        rows.append(bench.Row("D2" if target else "D2b",
                              "first result with %d starting at once, cell `%s`: p99 per session"
                              % (n_max, cell), b1 and b1["first_p99"], b2 and b2["first_p99"],
                              fmt_s, TARGETS["p99"] if target else None,
                              "p50: belljar %s, ipykernel %s; profile: \"belljar's start, "
                              "phase by phase\"" % (fmt_s(b1 and b1["first_p50"]),
                                                    fmt_s(b2 and b2["first_p50"]))))
    long_runs = result.get("long", {})

    def growth(kernel, key):
        pts = long_runs.get(kernel)
        return pts[-1][key] - pts[0][key] if pts and len(pts) > 1 else None

    if long_runs:
        first = long_runs[next(iter(long_runs))][0]["cells"]
        last = long_runs[next(iter(long_runs))][-1]["cells"]
        rows.append(bench.Row("D3", "kernel process RSS growth, cells %s → %s of `print(1)` "
                              "(belljar: the supervisor)" % (format(first, ","), format(last, ",")),
                              growth(bj, "kernel_rss"), growth(ipk, "kernel_rss"), fmt_mb,
                              None, "PSS growth: belljar %s, ipykernel %s; profile: \"Long "
                              "session\" below" % (fmt_signed_mb(growth(bj, "kernel_pss")),
                                                    fmt_signed_mb(growth(ipk, "kernel_pss"))),
                              absolute=(TARGETS["growth"], "≤ 2 MB")))
        rows[-1].ratio = None  # a ratio of two growths means nothing
    header = ["#", "figure", "belljar", "ipykernel", "ratio bj/ipk", "target", "result", "note"]
    target_rows = [r.cells() for r in rows if r.bj is not None or r.ipk is not None]

    # -- how each figure grows with N
    several = len(sizes) > 1  # the growth columns need two N
    grow_header = ["figure", "kernel"] + ["N = %d" % n for n in sizes] + \
        (["per added session", "N = %d ÷ N = %d" % (n_max, n_min)] if several else []) + \
        ["bj/ipk at N = %d" % n_max]
    grow_tables = {}
    for cell in cells:
        table = []
        for _key, label, fmt, fn in FIGURES:
            for k in kernels:
                ys = series(k, cell, fn)
                if all(y is None for y in ys):
                    continue
                other = series(ipk, cell, fn)[-1] if k == bj and ipk in kernels else None
                ratio = ys[-1] / other if ys[-1] is not None and other else None
                growth_cells = [fmt_slope(fmt, slope(sizes, ys)),
                                "%.2f×" % (ys[-1] / ys[0]) if ys[0] and ys[-1] is not None
                                else "—"] if several else []
                table.append([label if k == kernels[0] else "", k] + [fmt(y) for y in ys] +
                             growth_cells + [fmt_ratio(ratio) if k == bj else ""])
        grow_tables[cell] = table

    # -- belljar's PSS by process role, per session
    role_header = ["cell", "process"] + ["N = %d" % n for n in sizes] + \
        (["per added session"] if several else [])
    role_rows = []
    for cell in cells:
        for k in kernels:
            names = [r for r in bench.ROLES.get(k, ()) if any(
                r in b["roles"] for b in batches if b["kernel"] == k and b["cell"] == cell)]
            extra = sorted({r for b in batches if b["kernel"] == k and b["cell"] == cell
                            for r in b["roles"]} - set(names))
            for role in names + extra:
                per = series(k, cell,
                             lambda b, role=role: b["roles"].get(role, {}).get("pss", 0) / b["n"])
                tot = series(k, cell, lambda b, role=role: b["roles"].get(role, {}).get("pss", 0))
                role_rows.append([cell, "%s %s" % (k, role)] + [fmt_mb(y) for y in per] +
                                 ([fmt_slope(fmt_mb, end_slope(sizes, tot))] if several else []))

    # -- belljar's start, phase by phase (from its audit records)
    phase_header = ["cell", "N", "sessions", "start → worker_start (supervisor up)",
                    "→ cell start (sandbox, Python)", "cell runs", "→ reply at client", "total",
                    "slowest session"]
    phase_rows = []
    for cell in cells:
        for n in sizes:
            b = by.get((bj, cell, n))
            if not b:
                continue
            recs = [s for s in b["sessions"] if s.get("phases")]
            if not recs:
                continue
            keys = ("to_worker_start", "worker_to_cell", "cell", "end_to_reply")
            meds = [median([r["phases"][key] for r in recs]) for key in keys]
            slow = max(recs, key=lambda r: r["first_result_s"])
            phase_rows.append([cell, n, "median of %d" % len(recs)] + [fmt_s(m) for m in meds] +
                              [fmt_s(median([r["first_result_s"] for r in recs])),
                               "%s = %s" % (" + ".join(fmt_s(slow["phases"][key]) for key in keys),
                                            fmt_s(slow["first_result_s"]))])

    # -- the batches themselves
    batch_header = ["kernel", "cell", "N", "machine CPU before", "load", "spawn all",
                    "harness CPU while starting", "MemAvailable before → idle → after shutdown",
                    "killed"]
    batch_rows = [[b["kernel"], b["cell"], b["n"], "%.0f%%" % b["machine_cpu_percent"],
                   "%.2f" % b["load1"], fmt_s(b["spawn_all_s"]), fmt_s(b["harness_cpu_s"]),
                   "%s → %s → %s" % (fmt_mb(b["avail_before"]), fmt_mb(b["avail_idle"]),
                                     fmt_mb(b["avail_after"])), b["killed"]]
                  for b in batches]

    # -- the supervisor under load, and the long session's growth by mapping
    sup_lines = []
    sup_batch = by.get((bj, "plain", n_max)) or next(
        (b for b in reversed(batches) if b["kernel"] == bj and b.get("supervisor_mappings")), None)
    if sup_batch and sup_batch.get("supervisor_mappings"):
        sup_lines = bench.mapping_lines(sup_batch["supervisor_mappings"], top=10)
    long_header = ["kernel", "cells", "time", "cells/s", "kernel process RSS", "PSS",
                   "tree PSS", "RSS since first point"]
    long_rows, long_maps = [], {}
    for k, pts in long_runs.items():
        for p in pts:
            long_rows.append([k, format(p["cells"], ","), fmt_s(p["elapsed_s"]),
                              "%.0f" % (p["cells"] / p["elapsed_s"]), fmt_mb(p["kernel_rss"]),
                              fmt_mb(p["kernel_pss"]), fmt_mb(p["tree_pss"]),
                              fmt_signed_mb(p["kernel_rss"] - pts[0]["kernel_rss"])])
        if pts[0].get("mappings") and pts[-1].get("mappings"):
            a = {m["mapping"]: m for m in pts[0]["mappings"]}
            z = {m["mapping"]: m for m in pts[-1]["mappings"]}
            diffs = []
            for name in set(a) | set(z):
                d = z.get(name, {}).get("rss", 0) - a.get(name, {}).get("rss", 0)
                if d:
                    diffs.append((d, name))
            diffs.sort(key=lambda t: -abs(t[0]))
            long_maps[k] = ["%s: %s RSS" % (os.path.basename(name) or name, fmt_signed_mb(d))
                            for d, name in diffs[:6]] or ["no mapping changed"]

    banner = "QUICK RUN (small N, short long session: a smoke check)\n" if quick else ""
    info_lines = bench.header_lines(info)
    explain_d = ("Ratios are belljar ÷ ipykernel; a target is met when the ratio is at or under "
                 "it. PSS per additional session is (PSS(N = %d) − PSS(N = %d)) ÷ %d, summed over "
                 "every process of every kernel's tree. p99 is nearest-rank over the N sessions "
                 "(with N ≤ 100 it is the slowest)." % (n_max, n_min, n_max - n_min))

    text = [banner + "\n".join(info_lines), "", bench.text_table(header, target_rows)]
    md = ["# Density: many sessions on one host — belljar vs ipykernel", ""]
    if quick:
        md += ["**Quick run** (small N, short long session): a smoke check, not numbers.", ""]
    md += ["Produced by `bench/density.py` (method: `bench/README.md`, \"Density\"). " + explain_d,
           ""] + ["- " + line for line in info_lines] + ["", bench.markdown_table(header, target_rows), ""]
    for cell in cells:
        if grow_tables[cell]:
            title = "How each figure grows with N: cell `%s`" % CELLS[cell][0]
            text += ["", title + ":", bench.text_table(grow_header, grow_tables[cell])]
            md += ["## " + title, "", bench.markdown_table(grow_header, grow_tables[cell]), ""]
    if role_rows:
        title = "PSS per session by process (belljar's PSS by process)"
        text += ["", title + ":", bench.text_table(role_header, role_rows)]
        md += ["## " + title, "", "Idle, after the first result: each role's PSS summed over the "
               "N trees, ÷ N; the last column is the slope of the role's total (N = %d → %d)."
               % (n_min, n_max), "", bench.markdown_table(role_header, role_rows), ""]
    if phase_rows:
        title = "belljar's start, phase by phase"
        text += ["", title + " (audit records; medians):",
                 bench.text_table(phase_header, phase_rows)]
        md += ["## " + title, "", "From each session's audit records (the default's file per kernel, "
               "in the state directory), against the harness's clock "
               "at the session's start: `worker_start` (the supervisor is exec'd, has read the "
               "connection file, bound its sockets and forked the warden), the cell's `start` "
               "(warden and init built the sandbox — namespaces, mounts, pivot_root, seccomp — "
               "the worker's Python came up and said hello, the queued request went to it), the "
               "cell's end (`ts` of its record), the reply at the client. Medians per phase, and "
               "the slowest session's phases.", "",
               bench.markdown_table(phase_header, phase_rows), ""]
    if sup_lines:
        title = "One supervisor under load, mapping by mapping (N = %d, cell `%s`)" % (
            sup_batch["n"], sup_batch["cell"])
        text += ["", title + ":"] + ["  " + line for line in sup_lines]
        md += ["## " + title, ""] + ["- " + line for line in sup_lines] + [""]
    if long_rows:
        title = "Long session: `print(1)`, each cell awaited"
        text += ["", title + ":", bench.text_table(long_header, long_rows)]
        md += ["## " + title, "", bench.markdown_table(long_header, long_rows), ""]
        for k, lines in long_maps.items():
            text += ["  %s: what grew, first → last point, by mapping: %s" % (k, "; ".join(lines))]
            md += ["- %s: what grew, first → last point, by mapping: %s" % (k, "; ".join(lines))]
        md += [""]
    text += ["", "batches (in the order run):", bench.text_table(batch_header, batch_rows)]
    md += ["## The batches, in the order run", "", "Machine CPU: the whole machine's use over "
           "0.5 s just before the batch (other work included); harness CPU: the bench process's "
           "own CPU time from the first spawn to the last first result.", "",
           bench.markdown_table(batch_header, batch_rows), ""]
    if notes:
        text += ["", "notes:"] + ["  " + n for n in notes]
        md += ["## Notes", ""] + ["- " + n for n in notes] + [""]
    return {"text": "\n".join(text), "markdown": "\n".join(md)}


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="N = 3, 6 and a 2,000-cell long session (a smoke check, ~1 min)")
    ap.add_argument("--sizes", help="comma-separated N [10,25,50; quick 3,6]")
    ap.add_argument("--cells", default=",".join(CELLS), help="any of %s" % ",".join(CELLS))
    ap.add_argument("--kernels", default=",".join(KERNELS), help="any of %s" % ",".join(KERNELS))
    ap.add_argument("--skip", default="", help="comma-separated: density (the N batches), long "
                    "(the long session), long-ipykernel (its ipykernel reference)")
    ap.add_argument("--long-cells", type=int, help="cells in the long session [20000; quick 2000]")
    ap.add_argument("--idle", type=float, default=IDLE, help="seconds of idle before measuring")
    ap.add_argument("--output", default=str(HERE / "DENSITY.md"),
                    help="markdown report to write ('-' for none) [bench/DENSITY.md]")
    ap.add_argument("--json", help="also write every raw sample to this JSON file")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (every session's stderr)")
    args = ap.parse_args()

    quick = args.quick
    sizes = sorted({int(x) for x in args.sizes.split(",")}) if args.sizes else \
        list(QUICK_SIZES if quick else SIZES)
    cells = [c for c in args.cells.split(",") if c]
    kernels = [k for k in args.kernels.split(",") if k]
    skip = set(filter(None, args.skip.split(",")))
    settle_max = QUICK_SETTLE_MAX if quick else SETTLE_MAX
    long_cells = args.long_cells or (QUICK_LONG_CELLS if quick else LONG_CELLS)
    for c in cells:
        if c not in CELLS:
            ap.error("unknown cell %r (choose from %s)" % (c, ", ".join(CELLS)))
    for k in kernels:
        if k not in KERNELS:
            ap.error("unknown kernel %r (choose from %s)" % (k, ", ".join(KERNELS)))
    if "belljar" in kernels and not os.access(bench.BELLJAR, os.X_OK):
        log("%s is missing: belljar skipped" % bench.BELLJAR)
        kernels.remove("belljar")
    if not kernels or not sizes or min(sizes) < 1:
        ap.error("nothing to measure")

    def terminated(*_):
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, terminated)  # unwinds like Ctrl-C: every kernel is killed
    b = bench.Bench(args)
    (b.tmp / "logs").mkdir()
    fleet = Fleet()
    notes = []
    result = {"batches": [], "long": {}}
    started = datetime.datetime.now().astimezone()
    load_start = "%.2f %.2f %.2f" % os.getloadavg()
    if os.geteuid() != 0:
        notes.append("not run as root: PSS of belljar's jail processes (another uid) may be "
                     "unreadable; RSS is used for those (listed per batch)")
    try:
        for k in kernels:
            b.install(k)
        log("warm-up: one session of each kernel (numpy cell)")
        warm_up(b, fleet, kernels)
        if "density" not in skip:
            step = 0
            for n in sizes:
                for cell in cells:
                    order = kernels if step % 2 == 0 else list(reversed(kernels))
                    step += 1
                    for k in order:
                        try:
                            r = batch(b, fleet, k, n, cell, args.idle, settle_max)
                        except (RuntimeError, TimeoutError, psutil.Error, zmq.ZMQError) as e:
                            notes.append("%s, N = %d, cell %s failed: %s" % (k, n, cell, e))
                            log("FAILED:", e)
                            continue
                        result["batches"].append(r)
                        if r["unreadable"]:
                            notes.append("%s N = %d %s: PSS unreadable (RSS used) for %s" % (
                                k, n, cell, ", ".join(r["unreadable"][:5])))
                        if r["killed"]:
                            notes.append("%s N = %d %s: %d trees still there %d s after the "
                                         "shutdown request were killed" % (
                                             k, n, cell, r["killed"], SHUTDOWN_TIMEOUT))
                        log("    first result p50 %s p99 %s; PSS %s (%s each); shutdown %s" % (
                            fmt_s(r["first_p50"]), fmt_s(r["first_p99"]), fmt_mb(r["pss"]),
                            fmt_mb(r["pss"] / n), fmt_s(r["shutdown_s"])))
        if "long" not in skip:
            for k in kernels:
                if k == "ipykernel" and "long-ipykernel" in skip:
                    continue
                settle(settle_max)
                log("long session: %s, %d cells of print(1)" % (k, long_cells))
                try:
                    result["long"][k] = long_session(b, fleet, k, long_cells)
                except (RuntimeError, TimeoutError, zmq.ZMQError) as e:
                    notes.append("long session %s failed: %s" % (k, e))
    finally:
        fleet.kill_all()
        b.close()

    info = bench.versions(kernels)
    info.update({"date": started.strftime("%Y-%m-%d %H:%M %Z"), "load_start": load_start,
                 "sizes": sizes, "cells": cells, "kernels": kernels})
    info["N"] = ("N = %s sessions at once × cells %s; idle %.0f s before measuring; long session "
                 "%s cells" % (", ".join(map(str, sizes)), ", ".join(cells), args.idle,
                               format(long_cells, ",") if "long" not in skip else "skipped"))
    spawn = {k: median([x["spawn_median_s"] for x in result["batches"] if x["kernel"] == k])
             for k in kernels if any(x["kernel"] == k for x in result["batches"])}
    if spawn:
        notes.append("harness cost per session (connection file, launch_kernel, client, send; "
                     "median): " + ", ".join("%s %s" % (k, fmt_s(v)) for k, v in spawn.items()))
    bench.write_outputs(build_report(result, info, notes, quick), args,
                  {"info": info, "result": result, "notes": notes})


if __name__ == "__main__":
    main()
