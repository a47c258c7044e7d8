#!/usr/bin/python3
"""What a checkpoint costs: %checkpoint and %rollback in belljar for sessions holding 10 MB,
500 MB and 2 GB of live objects, beside what users do today in ipykernel, in one run:
re-running the cells that built the state, and pickling the namespace with dill
(dump_module, then load_module in a fresh kernel).

    /usr/bin/python3 bench/checkpoints.py               # writes bench/CHECKPOINTS.md
    /usr/bin/python3 bench/checkpoints.py --sizes 10 --reps 1 --output -

The state is numpy arrays (four fifths of the size) and a dict of small lists (the rest). Times
are the client's: from sending the cell to its reply (checkpoint, rollback), so they include the
messaging a user waits through; the re-run and dill figures are timed inside the cell, which
favours them. Memory is the sandbox's peak (its cgroup's) as the cell's reply reports it: after
the checkpoint, and after the session then wrote a tenth of its arrays (the pages that diverge
are the checkpoint's cost).
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import statistics
import sys
import tempfile
import time

from jupyter_client.manager import KernelManager

HERE = pathlib.Path(__file__).resolve().parent
BELLJAR = os.environ.get("BELLJAR", str(HERE.parent / "build" / "belljar"))
PYTHON = "/usr/bin/python3"
TIMEOUT = 900
TARGET_MS = 100  # each of checkpoint and rollback at 500 MB (issue 41)

BUILD = """
import time, numpy as np
_start = time.perf_counter()
arrays = [np.random.default_rng(n).random(%(floats)d // 64) for n in range(8)]
table = {n: [n, n * 2.5, str(n)] for n in range(%(entries)d)}
_elapsed = time.perf_counter() - _start
"""
DIVERGE = "for a in arrays:\n    a[: len(a) // 10] += 1.0\n_elapsed = 0"
DILL_DUMP = """
import dill, time
_start = time.perf_counter()
dill.dump_module(%(path)r)
_elapsed = time.perf_counter() - _start
"""
DILL_LOAD = """
import dill, time
_start = time.perf_counter()
dill.load_module(%(path)r)
_elapsed = time.perf_counter() - _start
"""


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


class Kernel:
    def __init__(self, name, spec_dirs, workspace):
        self.name = name
        self.km = KernelManager(kernel_name=name)
        self.km.kernel_spec_manager.kernel_dirs.insert(0, str(spec_dirs))
        self.km.start_kernel(cwd=str(workspace))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code, expressions=None):
        """(seconds from send to reply, the reply's content and metadata)."""
        start = time.perf_counter()
        reply = self.kc.execute_interactive(code, timeout=TIMEOUT, user_expressions=expressions or {},
                                            output_hook=lambda msg: None)
        took = time.perf_counter() - start
        if reply["content"]["status"] != "ok":
            raise RuntimeError("%s: %s: %s" % (self.name, reply["content"].get("ename"),
                                               reply["content"].get("evalue")))
        return took, reply

    def inside(self, code):
        """The cell's own `_elapsed`."""
        _, reply = self.run(code, {"e": "_elapsed"})
        return float(reply["content"]["user_expressions"]["e"]["data"]["text/plain"])

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel()  # asked: a killed kernel leaves its folder in /tmp


def install(spec_dirs, name):
    directory = spec_dirs / name
    directory.mkdir(parents=True)
    if name == "bench-ipykernel":
        argv = [PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    else:
        argv = [BELLJAR, "kernel", "-f", "{connection_file}", "--python", PYTHON, "--timeout",
                "900", "--memory", "12G", "--checkpoints", "4", "--output-limit", "10M"]
    (directory / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": name, "language": "python"}))


def peak(reply):
    return reply["metadata"].get("belljar", {}).get("peak_memory_bytes", 0) / 2**20


def measure(size_mb, reps, spec_dirs, workspace):
    floats = size_mb * 2**20 * 4 // 5
    entries = max(1000, size_mb * 2**20 // 5 // 200)  # a small list's entry: ~200 bytes
    build = BUILD % {"floats": floats, "entries": entries}
    row = {"checkpoint": [], "rollback": [], "rerun": [], "dump": [], "load": [],
           "peak_before": [], "peak_checkpoint": [], "peak_diverged": []}
    for rep in range(reps):
        belljar = Kernel("bench-belljar", spec_dirs, workspace)
        try:
            belljar.inside(build)
            _, reply = belljar.run("pass")
            row["peak_before"].append(peak(reply))
            took, reply = belljar.run("%checkpoint base")
            row["checkpoint"].append(took)
            row["peak_checkpoint"].append(peak(reply))
            _, reply = belljar.run(DIVERGE)
            row["peak_diverged"].append(peak(reply))
            took, _ = belljar.run("%rollback base")
            row["rollback"].append(took)
            check, _ = belljar.run("assert float(arrays[0][0]) < 1.0 and len(table) == %d"
                                   % entries)
        finally:
            belljar.close()
        ipykernel = Kernel("bench-ipykernel", spec_dirs, workspace)
        path = str(workspace / ("session-%d.pkl" % rep))
        try:
            row["rerun"].append(ipykernel.inside(build))
            row["dump"].append(ipykernel.inside(DILL_DUMP % {"path": path}))
        finally:
            ipykernel.close()
        fresh = Kernel("bench-ipykernel", spec_dirs, workspace)
        try:
            row["load"].append(fresh.inside(DILL_LOAD % {"path": path}))
        finally:
            fresh.close()
            os.unlink(path)
        log(f"  {size_mb} MB, repetition {rep + 1}: checkpoint {row['checkpoint'][-1] * 1000:.0f} ms, "
            f"rollback {row['rollback'][-1] * 1000:.0f} ms, re-run {row['rerun'][-1] * 1000:.0f} ms")
    return {k: statistics.median(v) for k, v in row.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10,500,2048", help="MB of live objects [10,500,2048]")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each size [3]")
    ap.add_argument("--output", default=str(HERE / "CHECKPOINTS.md"),
                    help="markdown report to write ('-' for none) [bench/CHECKPOINTS.md]")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="belljar-bench-ckpt-"))
    workspace = tmp / "workspace"
    workspace.mkdir()
    os.chmod(workspace, 0o777)  # the strict sandbox may run the code as another uid
    spec_dirs = tmp / "kernels"
    results = {}
    try:
        for name in ("bench-belljar", "bench-ipykernel"):
            install(spec_dirs, name)
        for size in (int(s) for s in args.sizes.split(",")):
            results[size] = measure(size, args.reps, spec_dirs, workspace)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    lines = [
        "# Checkpoints: what they cost",
        "",
        "`bench/checkpoints.py`, %s, %s: %d cores, Linux %s; median of %d repetitions." % (
            datetime.date.today().isoformat(), platform.node() or "host", os.cpu_count(),
            platform.release(), args.reps),
        "",
        "| live objects | %checkpoint | %rollback | re-run the cells (ipykernel) | dill dump + load "
        "(ipykernel) | peak before | peak after checkpoint | peak after writing a tenth |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for size, r in results.items():
        verdict = ""
        if size == 500:
            met = r["checkpoint"] * 1000 <= TARGET_MS and r["rollback"] * 1000 <= TARGET_MS
            verdict = " (target <= %d ms each: %s)" % (TARGET_MS, "met" if met else "MISSED")
        lines.append(
            "| %d MB | %.1f ms | %.1f ms%s | %.0f ms | %.0f + %.0f ms | %.0f MB | %.0f MB | %.0f MB |"
            % (size, r["checkpoint"] * 1000, r["rollback"] * 1000, verdict, r["rerun"] * 1000,
               r["dump"] * 1000, r["load"] * 1000, r["peak_before"], r["peak_checkpoint"],
               r["peak_diverged"]))
    lines += [
        "",
        "Checkpoint and rollback are the client's round trip of the magic's cell (a fork of the "
        "sandboxed worker; the rollback hands the session's descriptors to the checkpoint's "
        "process, which forks again). Re-running and dill are timed inside the cell. The peaks "
        "are the sandbox's memory cgroup's: a checkpoint costs the pages that diverge after it.",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.output != "-":
        pathlib.Path(args.output).write_text(report)


if __name__ == "__main__":
    main()
