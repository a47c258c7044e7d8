#!/usr/bin/python3
"""Where belljar's start time goes (run through bench/profile_start.sh; its header explains)."""
import argparse
import datetime
import json
import os
import pathlib
import re
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench  # noqa: E402  (the lean client, kernelspec handling)

PY = bench.PYTHON
WORKER_DIR = bench.SOURCE / "worker"
BOOTSTRAP = ("import sys; sys.path.insert(0, %r); "
             "from belljar_worker.main import serve; serve()" % str(WORKER_DIR))


def ms(x):
    return "%7.1f ms" % (x * 1e3)


def med(xs):
    return statistics.median(xs)


def section(title):
    print("\n== %s ==" % title, flush=True)


# -- 1. Python start-up -----------------------------------------------------------------------


def wall(cmd, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return med(times)


IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def parse_importtime(text):
    """[(module, self_us, cumulative_us, depth)] in the order -X importtime printed them."""
    out = []
    for line in text.splitlines():
        m = IMPORT_LINE.match(line)
        if m:
            out.append((m.group(4), int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2))
    return out


def python_startup(reps):
    section("1. Python start-up (/usr/bin/python3, median of %d)" % reps)
    for flags, what in ((["-s", "-E"], "the worker's flags"), (["-I", "-S"], "no site at all"),
                        ([], "plain")):
        print("  python3 %-8s -c pass      %s   (%s)" % (" ".join(flags), ms(wall([PY, *flags, "-c",
              "pass"], reps)), what))
    err = subprocess.run([PY, "-s", "-E", "-X", "importtime", "-c", "pass"],
                         capture_output=True, text=True).stderr
    mods = parse_importtime(err)
    total = sum(m[1] for m in mods) / 1e6
    top = [m for m in mods if m[3] == 0]
    print("  -X importtime before any user code: %d modules, %s of import time; top level:"
          % (len(mods), ms(total)))
    for name, _, cum, _ in sorted(top, key=lambda m: -m[2])[:6]:
        print("      %-28s %s" % (name, ms(cum / 1e6)))
    # what site pulls in (.pth files in dist-packages run at every start, -s or not)
    under_site, inside = [], False
    for name, _, cum, depth in reversed(mods):  # importtime prints children before parents
        if depth == 0:
            inside = name == "site"
        elif inside and depth == 1:
            under_site.append((name, cum))
    heavy = sorted(under_site, key=lambda m: -m[1])[:6]
    if heavy:
        print("    imported by site: " + ", ".join("%s %.1f ms" % (n, c / 1e3) for n, c in heavy))


# -- 2. the worker, outside any sandbox --------------------------------------------------------


class Worker:
    def __init__(self, importtime=False, stderr_path=None):
        ours, theirs = socket.socketpair()
        fd = theirs.fileno()
        flags = ["-X", "importtime"] if importtime else []
        self.err = open(stderr_path or os.devnull, "wb")
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [PY, *flags, "-s", "-E", "-c", BOOTSTRAP], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self.err, pass_fds=(fd, 3),
            preexec_fn=lambda: os.dup2(fd, 3), cwd="/tmp")
        theirs.close()
        self.sock = ours
        self.buf = b""

    def frame(self, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 4:
                n = int.from_bytes(self.buf[:4], "big")
                if len(self.buf) >= 4 + n:
                    data, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
                    return json.loads(data)
            if not select.select([self.sock], [], [], max(0, deadline - time.monotonic()))[0]:
                raise TimeoutError("no frame from the worker")
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError("the worker closed fd 3")
            self.buf += chunk

    def send(self, msg):
        data = json.dumps(msg).encode()
        self.sock.sendall(len(data).to_bytes(4, "big") + data)

    def run_one(self):
        """-> (seconds to hello, seconds from hello to the done of 1+1)."""
        hello = self.frame()
        t_hello = time.perf_counter()
        assert hello["type"] == "hello", hello
        self.send({"type": "execute", "id": "bench", "code": "1+1", "silent": False,
                   "store_history": True, "user_expressions": {"r": "1+1"},
                   "allow_stdin": False, "execution_count": 1})
        while True:
            f = self.frame()
            if f["type"] == "done":
                break
        t_done = time.perf_counter()
        return t_hello - self.t0, t_done - t_hello

    def close(self):
        self.sock.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


def worker_bootstrap(reps, tmp):
    section("2. the worker outside any sandbox (spawn -> hello -> done of 1+1, median of %d)" % reps)
    hello, done = [], []
    for _ in range(reps):
        w = Worker()
        try:
            h, d = w.run_one()
        finally:
            w.close()
        hello.append(h)
        done.append(d)
    print("  spawn -> hello frame          %s" % ms(med(hello)))
    print("  hello -> done of 1+1          %s   (session built after hello, then the cell)"
          % ms(med(done)))
    print("  spawn -> done                 %s" % ms(med(hello) + med(done)))
    path = tmp / "worker-importtime.txt"
    w = Worker(importtime=True, stderr_path=path)
    try:
        w.run_one()
    finally:
        w.close()
    mods = parse_importtime(path.read_text(errors="replace"))
    total = sum(m[1] for m in mods) / 1e6
    ours = sum(m[1] for m in mods if m[0].startswith("belljar_worker")) / 1e6
    print("  -X importtime: %d modules, %s in all, %s of it in belljar_worker's own code"
          % (len(mods), ms(total), ms(ours)))
    cum = {m[0]: m[2] for m in mods}
    for name in ("belljar_worker", "belljar_worker.main", "belljar_worker.wire",
                 "belljar_worker.streams", "belljar_worker.interrupts", "belljar_worker.session"):
        if name in cum:
            print("      %-34s cumulative %s" % (name, ms(cum[name] / 1e6)))
    print("  slowest imports (cumulative, any depth):")
    for name, _, c, depth in sorted(mods, key=lambda m: -m[2])[:12]:
        print("      %-34s %s%s" % (name, ms(c / 1e6), "   (depth %d)" % depth if depth else ""))


# -- 3. the kernel: audit-log timeline ---------------------------------------------------------


def parse_ts(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


class Kernels:
    def __init__(self, tmp):
        self.tmp = tmp
        self.b = bench.Bench(argparse.Namespace(keep=False))

    def install(self, isolation, audit, extra_argv_prefix=None, name=None):
        name = name or "profile-%s" % isolation
        flags = ["--audit-log", str(audit), "--isolation", isolation]
        cmd = [bench.BELLJAR, "install", "--prefix", str(self.b.prefix), "--name", name,
               "--python", PY, *flags]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(done.stderr.strip())
        spec = self.b.spec_dirs / name / "kernel.json"
        if extra_argv_prefix:
            data = json.loads(spec.read_text())
            data["argv"] = extra_argv_prefix + data["argv"]
            spec.write_text(json.dumps(data))
        self.b.names[name] = name
        self.b.logs[name] = self.tmp / (name + ".stderr")
        return name

    def first_result(self, name):
        km = self.b.manager(name)
        w0 = time.time()
        t0 = time.perf_counter()
        self.b.start(km, name)
        t_started = time.perf_counter() - t0
        client = bench.Client(km, self.b.ctx, channels=("shell",))
        try:
            msg_id = client.execute("1+1", user_expressions={"r": "1+1"})
            bench.check_two(client.reply(msg_id, bench.TIMEOUT))
            t_reply = time.perf_counter() - t0
        finally:
            client.close()
            self.b.stop(km)
        return w0, t_started, t_reply

    def close(self):
        self.b.close()


def audit_records(path):
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def timeline(kernels, isolation, reps):
    audit = kernels.tmp / ("audit-%s.jsonl" % isolation)
    name = kernels.install(isolation, audit)
    kernels.first_result(name)  # warm-up
    phases = {k: [] for k in ("launch", "sandbox", "python", "cell", "total")}
    for _ in range(reps):
        audit.write_text("")
        w0, t_started, t_reply = kernels.first_result(name)
        recs = {r.get("event"): r for r in audit_records(audit)}
        # worker_start is written once the sandbox stands and the worker is spawned; kernel_start
        # right after it (it carries the sandbox's notes), so it marks no phase of its own.
        try:
            w_start = parse_ts(recs["worker_start"]["ts"]) - w0
            c_start = parse_ts(recs["cell"]["start"]) - w0
        except KeyError as e:
            print("  audit log lacks %s; records: %s" % (e, sorted(recs)))
            return
        phases["launch"].append(t_started)
        phases["sandbox"].append(w_start)
        phases["python"].append(c_start - w_start)
        phases["cell"].append(t_reply - c_start)
        phases["total"].append(t_reply)
    m = {k: med(v) for k, v in phases.items()}
    print("  isolation %s (median of %d):" % (isolation, reps))
    print("    start_kernel() returns (connection file, Popen)         %s" % ms(m["launch"]))
    print("    start_kernel() -> worker_start (exec, flags, ZMQ bound,")
    print("      host probed, sandbox built, worker spawned)            %s" % ms(m["sandbox"]))
    print("    worker_start -> cell start (Python up, hello received)  %s" % ms(m["python"]))
    print("    cell start -> execute_reply at the client               %s" % ms(m["cell"]))
    print("      (the worker builds its session after hello, so the first cell waits for it)")
    print("    total: start_kernel() -> first result                   %s" % ms(m["total"]))
    return m


# -- 4. strace ---------------------------------------------------------------------------------

TRACED = ("execve,bind,listen,clone,clone3,fork,vfork,unshare,setns,mount,umount2,pivot_root,"
          "chroot,open_tree,move_mount,fsopen,fsmount,mount_setattr,seccomp,"
          "landlock_create_ruleset,landlock_restrict_self,exit_group")
STRACE_LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")


def strace_start(kernels, isolation):
    section("4. strace -f of one start (isolation %s): where; strace makes it slower" % isolation)
    strace = shutil.which("strace")
    if not strace:
        print("  strace is not installed: skipped")
        return
    trace = kernels.tmp / "strace.txt"
    audit = kernels.tmp / "audit-strace.jsonl"
    name = kernels.install(isolation, audit, name="profile-strace",
                           extra_argv_prefix=[strace, "-f", "-ttt", "-qq", "-s", "80", "-o",
                                              str(trace), "-e", "trace=" + TRACED])
    try:
        w0, _, t_reply = kernels.first_result(name)
    except Exception as e:  # noqa: BLE001
        print("  the kernel did not answer under strace: %s" % e)
        return
    events = []
    for line in trace.read_text(errors="replace").splitlines():
        m = STRACE_LINE.match(line)
        if m:
            events.append((int(m.group(1)), float(m.group(2)), m.group(3)))
    if not events:
        print("  no strace output")
        return
    t0 = events[0][1]
    print("  t=0 is the supervisor's execve; start_kernel() was called %s before it"
          % ms(t0 - w0))
    # consecutive calls of one family by one pid are folded into one line
    families = {"bind": "sockets", "listen": "sockets", "mount": "mounts", "umount2": "mounts",
                "open_tree": "mounts", "move_mount": "mounts", "fsopen": "mounts",
                "fsmount": "mounts", "mount_setattr": "mounts", "seccomp": "seccomp",
                "unshare": "unshare", "landlock_create_ruleset": "landlock",
                "landlock_restrict_self": "landlock"}
    folded = []
    for pid, ts, call in events:
        sc = call.split("(", 1)[0]
        fam = families.get(sc)
        if fam and folded and folded[-1]["pid"] == pid and folded[-1]["fam"] == fam:
            f = folded[-1]
            f["calls"][sc] = f["calls"].get(sc, 0) + 1
            f["last"] = ts
            continue
        folded.append({"pid": pid, "ts": ts, "last": ts, "fam": fam, "calls": {sc: 1},
                       "text": call})
    for f in folded[:60]:
        head = "  %+9.1f ms  pid %-7d " % ((f["ts"] - t0) * 1e3, f["pid"])
        if sum(f["calls"].values()) == 1:
            print(head + f["text"][:110])
        else:
            print(head + "%s: %s (until %+.1f ms)" % (
                f["fam"], ", ".join("%s ×%d" % kv for kv in f["calls"].items()),
                (f["last"] - t0) * 1e3))
    if len(folded) > 60:
        print("  ... %d more lines in the trace" % (len(folded) - 60))
    print("  first result at the client: %+.1f ms (under strace)" % ((w0 + t_reply - t0) * 1e3))

    summary = kernels.tmp / "strace-c.txt"
    name = kernels.install(isolation, audit, name="profile-strace-c",
                           extra_argv_prefix=[strace, "-c", "-f", "-S", "calls", "-o",
                                              str(summary)])
    kernels.first_result(name)
    for _ in range(50):  # strace writes the summary when the traced tree has exited
        if summary.exists() and summary.stat().st_size:
            break
        time.sleep(0.1)
    if summary.exists():
        lines = summary.read_text().splitlines()
        print("\n  strace -c -f, one start -> 1+1 -> shutdown (supervisor, jail and worker), "
              "by number of calls:")
        for line in lines[:17] + lines[-2:]:
            print("    " + line)


def main():
    ap = argparse.ArgumentParser(description="where belljar's start time goes")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--isolation", default="strict,none",
                    help="comma-separated isolation modes for the timeline [strict,none]")
    ap.add_argument("--no-strace", action="store_true")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="belljar-profile-"))
    try:
        python_startup(max(args.reps, 10))
        worker_bootstrap(args.reps, tmp)
        if not os.access(bench.BELLJAR, os.X_OK):
            print("\n%s is missing: the kernel sections are skipped" % bench.BELLJAR)
            return
        print("\nbelljar:", subprocess.run([bench.BELLJAR, "--version"], capture_output=True,
                                           text=True).stdout.strip())
        section("0. exec of the supervisor binary (median of %d)" % max(args.reps, 10))
        for cmd in ([bench.BELLJAR, "--version"], ["/bin/true"]):
            print("  %-40s %s" % (" ".join(cmd)[-40:], ms(wall(cmd, max(args.reps, 10)))))
        libs = subprocess.run(["ldd", bench.BELLJAR], capture_output=True, text=True).stdout
        print("  (exec, dynamic loading of %d shared libraries, static initialisers)"
              % len(libs.splitlines()))
        kernels = Kernels(tmp)
        try:
            section("3. the kernel through jupyter_client, cut at its audit records")
            for isolation in args.isolation.split(","):
                try:
                    timeline(kernels, isolation, args.reps)
                except Exception as e:  # noqa: BLE001
                    print("  isolation %s failed: %s" % (isolation, e))
            if not args.no_strace:
                strace_start(kernels, args.isolation.split(",")[0])
        finally:
            kernels.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
