#!/usr/bin/python3
"""belljar vs ipykernel, side by side, through jupyter_client.

    /usr/bin/python3 bench/bench.py                 # full run, writes bench/RESULTS.md
    /usr/bin/python3 bench/bench.py --quick         # small N, for a smoke check
    /usr/bin/python3 bench/bench.py --kernels belljar,ipykernel --output -

Every figure is measured for both kernels in the same run, interleaved repetition by
repetition, and reported as the median over the repetitions together with the ratio
belljar / ipykernel and the target that ratio must meet. bench/README.md explains the method.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psutil
import zmq
from jupyter_client.manager import KernelManager
from jupyter_client.session import Session

import brokered  # figure 11, beside this file

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parent
BELLJAR = os.environ.get("BELLJAR", str(SOURCE / "build" / "belljar"))
PYTHON = "/usr/bin/python3"
TIMEOUT = 120
OUTPUT_LIMIT = "100M"      # so the 200k-line cell is delivered whole (the default cap is 10M)
STREAM_LINES = 200_000
INTERRUPT_WAIT = 20        # seconds an interrupted busy loop may take to reply
RECONNECT_IVL_MS = 10      # client sockets retry a refused connect every 10 ms (ZMQ default: 100)
DOWNLOAD_BYTES = 100 * 10**6  # the egress figure: one 100 MB download from a server on 127.0.0.1

# name -> (label, install flags); "ipykernel" is special-cased.
KERNELS = {
    "belljar": ("belljar (strict)", []),
    "ipykernel": ("ipykernel", None),
    "belljar-none": ("belljar --isolation none", ["--isolation", "none"]),
    "belljar-audit": ("belljar --audit-log - (stderr)", ["--audit-log", "-"]),
}


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# the egress figure: a local HTTP server that stands for the outside world


class DownloadHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    block = b"x" * (1 << 20)

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(DOWNLOAD_BYTES))
        self.end_headers()
        left = DOWNLOAD_BYTES
        view = memoryview(self.block)
        while left > 0:
            n = min(left, len(view))
            self.wfile.write(view[:n])
            left -= n

    def log_message(self, *args):
        pass


def start_download_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), DownloadHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# Defined in each kernel once. In belljar the request goes through HTTP_PROXY (the kernel's
# egress proxy, the only way out of the sandbox); in ipykernel straight to the server.
DOWNLOAD_CELL = """
import time as _time, urllib.request as _request
def _bench_download(url, direct):
    opener = _request.build_opener(*([_request.ProxyHandler({})] if direct else []))
    buf, total = bytearray(1 << 20), 0
    t0 = _time.perf_counter()
    with opener.open(url, timeout=300) as response:
        while True:
            n = response.readinto(buf)
            if not n:
                break
            total += n
    return total, _time.perf_counter() - t0
"""


# ---------------------------------------------------------------------------------------------
# a lean client: jupyter_client's Session (signing, framing) over plain synchronous zmq sockets.
# jupyter_client 7's BlockingKernelClient runs an asyncio loop per call (nest_asyncio), which
# costs more per message than a fast kernel's own round trip; both kernels get the same client.


class Client:
    def __init__(self, conn, ctx, channels=("shell", "iopub", "control")):
        """conn: a started KernelManager, or a connection-info dict (a connection file's
        contents, as jupyter_client's write_connection_file returns it)."""
        info = conn.get_connection_info() if hasattr(conn, "get_connection_info") else conn
        key = info["key"]
        self.session = Session(key=key.encode() if isinstance(key, str) else key,
                               signature_scheme=info["signature_scheme"], username="bench")
        self.sockets = {}
        for name in channels:
            kind = {"shell": zmq.DEALER, "control": zmq.DEALER, "iopub": zmq.SUB}[name]
            sock = ctx.socket(kind)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
            if kind == zmq.DEALER:
                sock.setsockopt(zmq.IDENTITY, uuid.uuid4().hex.encode())
            else:
                sock.setsockopt(zmq.SUBSCRIBE, b"")
                sock.setsockopt(zmq.RCVHWM, 0)
            sock.connect("%s://%s:%d" % (info["transport"], info["ip"], info[name + "_port"]))
            self.sockets[name] = sock

    def close(self):
        for sock in self.sockets.values():
            sock.close(linger=0)
        self.sockets = {}

    def send(self, channel, msg_type, content):
        msg = self.session.msg(msg_type, content)
        self.session.send(self.sockets[channel], msg)
        return msg["header"]["msg_id"]

    def execute(self, code, user_expressions=None, silent=False, store_history=True):
        return self.send("shell", "execute_request", {
            "code": code, "silent": silent, "store_history": store_history,
            "user_expressions": user_expressions or {}, "allow_stdin": False,
            "stop_on_error": True})

    def recv(self, channel, timeout):
        sock = self.sockets[channel]
        if not sock.poll(int(timeout * 1000)):
            return None
        _, frames = self.session.feed_identities(sock.recv_multipart(copy=False), copy=False)
        return self.session.deserialize(frames, content=True, copy=False)

    def reply(self, msg_id, timeout=TIMEOUT):
        """The shell reply to msg_id (other replies are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply in %.0f s" % timeout)
            msg = self.recv("shell", left)
            if msg and msg["parent_header"].get("msg_id") == msg_id:
                return msg

    def run(self, code, timeout=TIMEOUT, on_output=None, **options):
        """Executes code; returns (reply, seconds to reply, seconds to idle on iopub).

        on_output(msg) sees every iopub message of the request before its idle status."""
        poller = zmq.Poller()
        poller.register(self.sockets["shell"], zmq.POLLIN)
        poller.register(self.sockets["iopub"], zmq.POLLIN)
        t0 = time.perf_counter()
        msg_id = self.execute(code, **options)
        deadline = t0 + timeout
        reply = t_reply = t_idle = None
        while reply is None or t_idle is None:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError("%r: no %s in %.0f s" % (code[:40], "reply" if reply is None
                                                             else "idle", timeout))
            for sock, _ in poller.poll(int(left * 1000) + 1):
                channel = "shell" if sock is self.sockets["shell"] else "iopub"
                while self.sockets[channel].poll(0):
                    msg = self.recv(channel, 0)
                    if msg["parent_header"].get("msg_id") != msg_id:
                        continue
                    if channel == "shell":
                        reply, t_reply = msg, time.perf_counter() - t0
                    elif (msg["msg_type"] == "status"
                          and msg["content"]["execution_state"] == "idle"):
                        t_idle = time.perf_counter() - t0
                    elif on_output:
                        on_output(msg)
        return reply, t_reply, t_idle

    def settle(self, timeout=TIMEOUT):
        """Blocks until iopub is subscribed: repeats a no-op until its idle status arrives."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg_id = self.execute("", silent=True, store_history=False)
            self.reply(msg_id, timeout)
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                msg = self.recv("iopub", end - time.monotonic())
                if (msg and msg["parent_header"].get("msg_id") == msg_id
                        and msg["msg_type"] == "status"
                        and msg["content"]["execution_state"] == "idle"):
                    self.drain()
                    return
        raise TimeoutError("iopub never delivered a status")

    def drain(self, quiet=0.05):
        while any(s.poll(int(quiet * 1000)) for s in self.sockets.values()):
            for s in self.sockets.values():
                while s.poll(0):
                    s.recv_multipart()


def check_value(reply, expected, what="1+1"):
    """The execute_reply is ok and its user_expressions["r"] shows as `expected`."""
    content = reply["content"]
    if content.get("status") != "ok":
        raise RuntimeError("%s failed: %s: %s" % (what, content.get("ename"), content.get("evalue")))
    value = content.get("user_expressions", {}).get("r", {})
    text = value.get("data", {}).get("text/plain")
    if text != expected:
        raise RuntimeError("user_expressions r = %r, expected %r" % (value, expected))


def check_two(reply):
    check_value(reply, "2")


# ---------------------------------------------------------------------------------------------
# kernels


class Bench:
    def __init__(self, args):
        self.args = args
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="belljar-bench-"))
        self.prefix = self.tmp / "prefix"
        self.spec_dirs = self.prefix / "share" / "jupyter" / "kernels"
        self.workspace = self.tmp / "workspace"
        self.workspace.mkdir()
        os.chmod(self.workspace, 0o777)  # the strict sandbox may run the code as another uid
        self.runtime = self.tmp / "runtime"
        self.runtime.mkdir()
        os.environ["JUPYTER_RUNTIME_DIR"] = str(self.runtime)
        # belljar's default audit log, a file per kernel in the state directory: in the temp dir
        self.state = self.tmp / "state"
        os.environ["XDG_STATE_HOME"] = str(self.state)
        self.env = dict(os.environ)
        self.ctx = zmq.Context()
        self.names = {}     # our kernel name -> kernelspec name
        self.logs = {}      # our kernel name -> stderr log path
        self.log_files = {}

    def close(self):
        self.ctx.destroy(linger=0)
        for f in self.log_files.values():
            f.close()
        if self.args.keep:
            log("kept", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def install(self, name):
        spec_name = "bench-" + name
        if name == "ipykernel":
            d = self.spec_dirs / spec_name
            d.mkdir(parents=True)
            (d / "kernel.json").write_text(json.dumps({
                "argv": [PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (ipykernel, bench)", "language": "python",
                "metadata": {"debugger": True}}))
        else:
            cmd = [BELLJAR, "install", "--prefix", str(self.prefix), "--name", spec_name,
                   "--python", PYTHON, "--output-limit", OUTPUT_LIMIT, *KERNELS[name][1]]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise RuntimeError("%s: %s" % (" ".join(cmd), done.stderr.strip()))
        self.names[name] = spec_name
        self.logs[name] = self.tmp / (name + ".stderr")

    def install_egress(self, port):
        """belljar (strict) allowed to reach the download server, and only it."""
        cmd = [BELLJAR, "install", "--prefix", str(self.prefix), "--name", "bench-belljar-egress",
               "--python", PYTHON, "--output-limit", OUTPUT_LIMIT, "--allow-net", "127.0.0.1:%d" % port]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(cmd), done.stderr.strip()))
        self.names["belljar-egress"] = "bench-belljar-egress"
        self.logs["belljar-egress"] = self.tmp / "belljar-egress.stderr"

    def install_secret(self, port, ca):
        """belljar (strict) with a secret bound to the HTTPS stand-in (figure 11), whose CA the
        proxy trusts (--upstream-ca: the kernel's environment never names one)."""
        cmd = [BELLJAR, "install", "--prefix", str(self.prefix), "--name", "bench-belljar-secret",
               "--python", PYTHON, "--output-limit", OUTPUT_LIMIT, *brokered.kernel_flags(port),
               "--upstream-ca", str(ca)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(cmd), done.stderr.strip()))
        self.names["belljar-secret"] = "bench-belljar-secret"
        self.logs["belljar-secret"] = self.tmp / "belljar-secret.stderr"

    def download(self, client, url, direct):
        """Seconds the kernel's code took to read the whole download (measured in the cell)."""
        reply, _, _ = client.run("", user_expressions={"r": "_bench_download(%r, %r)" % (url, direct)})
        result = reply["content"]["user_expressions"]["r"]
        if result.get("status") != "ok":
            raise RuntimeError("the download failed: %s: %s" % (result.get("ename"), result.get("evalue")))
        total, seconds = eval(result["data"]["text/plain"])  # a tuple of two numbers
        if total != DOWNLOAD_BYTES:
            raise RuntimeError("the download was %d bytes, not %d" % (total, DOWNLOAD_BYTES))
        return seconds

    def kernelspec(self, name):
        """The installed kernel.json of one of our kernels, as a dict."""
        return json.loads((self.spec_dirs / self.names[name] / "kernel.json").read_text())

    def manager(self, name):
        km = KernelManager(kernel_name=self.names[name])
        km.kernel_spec_manager.kernel_dirs.insert(0, str(self.spec_dirs))
        return km

    def start(self, km, name, env=None):
        # one file per kernel kind, kept open: restart_kernel() launches again with these args
        if name not in self.log_files:
            self.log_files[name] = open(self.logs[name], "ab")
        km.start_kernel(cwd=str(self.workspace), env=env or self.env, stderr=self.log_files[name])

    def stop(self, km):
        try:
            km.shutdown_kernel(now=False)
        except Exception as e:  # noqa: BLE001 - a failed shutdown must not hide the figures
            log("shutdown:", e)

    def log_tail(self, name, lines=15):
        try:
            text = self.logs[name].read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    # -- figures ---------------------------------------------------------------------------

    def first_result(self, name):
        """start_kernel() -> execute_reply of a request sent as soon as the channels exist."""
        km = self.manager(name)
        t0 = time.perf_counter()
        self.start(km, name)
        client = Client(km, self.ctx, channels=("shell",))
        try:
            msg_id = client.execute("1+1", user_expressions={"r": "1+1"})
            reply = client.reply(msg_id, TIMEOUT)
            elapsed = time.perf_counter() - t0
            check_two(reply)
        finally:
            client.close()
            self.stop(km)
        return elapsed

    def wait_for_ready(self, name):
        """start_kernel() -> BlockingKernelClient.wait_for_ready() returns (what nbclient does)."""
        km = self.manager(name)
        t0 = time.perf_counter()
        self.start(km, name)
        kc = km.client()
        try:
            kc.start_channels()
            kc.wait_for_ready(timeout=TIMEOUT)
            elapsed = time.perf_counter() - t0
        finally:
            kc.stop_channels()
            self.stop(km)
        return elapsed

    def session(self, name, env=None):
        """A started kernel and a settled lean client."""
        km = self.manager(name)
        self.start(km, name, env)
        client = Client(km, self.ctx)
        client.settle()
        return km, client

    def round_trips(self, client, count):
        for _ in range(5):
            client.run("1+1")
        times = []
        for _ in range(count):
            reply, _, t_idle = client.run("1+1")
            if reply["content"]["status"] != "ok":
                raise RuntimeError("1+1 failed")
            times.append(t_idle)
        return times

    def stock_round_trips(self, km, client, count):
        """The same round trip through jupyter_client's own BlockingKernelClient."""
        kc = km.client()
        kc.start_channels()
        times = []
        try:
            kc.wait_for_ready(timeout=TIMEOUT)
            for i in range(count + 5):
                t0 = time.perf_counter()
                msg_id = kc.execute("1+1")
                while kc.get_shell_msg(timeout=TIMEOUT)["parent_header"].get("msg_id") != msg_id:
                    pass
                while True:
                    msg = kc.get_iopub_msg(timeout=TIMEOUT)
                    if (msg["parent_header"].get("msg_id") == msg_id
                            and msg["msg_type"] == "status"
                            and msg["content"]["execution_state"] == "idle"):
                        break
                if i >= 5:
                    times.append(time.perf_counter() - t0)
        finally:
            kc.stop_channels()
        client.drain()
        return times

    def restart(self, km, client, name):
        """km.restart_kernel(now=False) -> first reply, as in first_result."""
        client.close()
        t0 = time.perf_counter()
        km.restart_kernel(now=False)
        returned = time.perf_counter() - t0
        fresh = Client(km, self.ctx, channels=("shell",))
        try:
            msg_id = fresh.execute("1+1", user_expressions={"r": "1+1"})
            reply = fresh.reply(msg_id, TIMEOUT)
            elapsed = time.perf_counter() - t0
            check_two(reply)
        finally:
            fresh.close()
        return elapsed, returned

    def stream(self, client):
        got = {"lines": 0, "bytes": 0, "messages": 0, "last": ""}

        def on_output(msg):
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                text = msg["content"]["text"]
                got["lines"] += text.count("\n")
                got["bytes"] += len(text)
                got["messages"] += 1
                got["last"] = text[-16:]

        reply, _, t_idle = client.run("for i in range(%d): print(i)" % STREAM_LINES,
                                      on_output=on_output)
        if reply["content"]["status"] != "ok":
            raise RuntimeError("stream cell failed: %s" % reply["content"].get("evalue"))
        return t_idle, got

    def interrupt(self, km, client):
        """while True: pass; 0.5 s later km.interrupt_kernel(); seconds until execute_reply."""
        msg_id = client.execute("while True: pass")
        time.sleep(0.5)
        t0 = time.perf_counter()
        km.interrupt_kernel()
        reply = client.reply(msg_id, INTERRUPT_WAIT)
        elapsed = time.perf_counter() - t0
        if reply["content"].get("status") != "error":
            raise RuntimeError("the busy loop was not interrupted: %s" % reply["content"])
        ename = reply["content"].get("ename")
        client.drain(0.2)
        return elapsed, ename

    def warm_up(self, client):
        cells = ["1+1", "import sys, os, math", "x = [i * i for i in range(10000)]",
                 "print('hello')", "sum(x)", "def f(a):\n    return a + 1\nf(2)",
                 "import json; json.dumps({'a': [1, 2, 3]})", "x[:3]"]
        for code in cells:
            client.run(code)


# ---------------------------------------------------------------------------------------------
# memory


def tree(pid):
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def memory_of(procs):
    """Sums RSS, PSS and USS over procs; names the ones whose PSS could not be read."""
    total = {"rss": 0, "pss": 0, "uss": 0, "procs": [], "unreadable": []}
    for p in procs:
        try:
            name = p.name()
            rss = p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied) as e:
            total["unreadable"].append("%d (%s)" % (p.pid, type(e).__name__))
            continue
        entry = {"pid": p.pid, "name": name, "rss": rss}
        try:
            entry["ppid"] = p.ppid()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
        try:
            full = p.memory_full_info()
            entry["pss"], entry["uss"] = full.pss, full.uss
        except (psutil.NoSuchProcess, psutil.AccessDenied) as e:
            entry["pss"] = entry["uss"] = rss  # fall back; flagged below
            total["unreadable"].append("%d %s PSS (%s)" % (p.pid, name, type(e).__name__))
        try:
            entry["uids"] = p.uids().real
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
        for key in ("rss", "pss", "uss"):
            total[key] += entry[key]
        total["procs"].append(entry)
    return total


# What each process of a kernel's tree is, by its depth under the kernel process (belljar's warden
# and init name themselves belljar-warden and belljar-init, but a worker's subprocess may be
# called anything: depth is what tells them apart).
ROLES = {"belljar": ("supervisor", "warden", "init", "worker"), "ipykernel": ("kernel",)}


def label_roles(entries, kernel):
    """Sets entry["role"] on memory_of()'s entries of one tree (entries[0] is the kernel process):
    the role at that depth, or "<deepest role>'s child" below it."""
    names = ROLES.get("belljar" if kernel.startswith("belljar") else kernel, ("kernel",))
    depth = {}
    for e in entries:
        depth[e["pid"]] = 0 if not depth else None
    for _ in entries:  # parents may come after their children: settle in a few passes
        for e in entries:
            if depth[e["pid"]] is None and depth.get(e.get("ppid")) is not None:
                depth[e["pid"]] = depth[e["ppid"]] + 1
    for e in entries:
        d = depth[e["pid"]]
        e["role"] = (names[d] if d is not None and d < len(names)
                     else "%s's child" % names[-1])
    return entries


def mappings(pid):
    """RSS and PSS of one process per mapped file, from /proc/PID/smaps (anonymous mappings as
    [anon], plus [heap], [stack], ...), largest PSS first: where a process's memory is."""
    by_name = {}
    name = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            field, _, rest = line.partition(" ")
            if not field.endswith(":") or "-" in field:  # a mapping's header line
                parts = line.split(None, 5)
                name = parts[5].strip() if len(parts) > 5 else "[anon]"
                by_name.setdefault(name, {"mapping": name, "rss": 0, "pss": 0, "count": 0})
                by_name[name]["count"] += 1
            elif field in ("Rss:", "Pss:"):
                by_name[name][field[:-1].lower()] += int(rest.split()[0]) * 1024
    return sorted(by_name.values(), key=lambda m: -m["pss"])


def mapping_lines(maps, top=12):
    """mappings() as report lines: the largest by PSS, the rest summed."""
    lines = ["%s: RSS %s, PSS %s%s" % (os.path.basename(m["mapping"]) or m["mapping"],
                                      fmt_mb(m["rss"]), fmt_mb(m["pss"]),
                                      " (%d mappings)" % m["count"] if m["count"] > 1 else "")
             for m in maps[:top]]
    rest = maps[top:]
    if rest:
        lines.append("%d others: RSS %s, PSS %s" % (len(rest), fmt_mb(sum(m["rss"] for m in rest)),
                                                   fmt_mb(sum(m["pss"] for m in rest))))
    lines.append("total: RSS %s, PSS %s" % (fmt_mb(sum(m["rss"] for m in maps)),
                                            fmt_mb(sum(m["pss"] for m in maps))))
    return lines


class Sampler(threading.Thread):
    """Peak of the summed RSS over the process trees of some kernels (sampled every 0.25 s)."""

    def __init__(self, pids, interval=0.25):
        super().__init__(daemon=True)
        self.pids, self.interval = pids, interval
        self.peak = 0
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.is_set():
            total = 0
            for pid in list(self.pids()):
                for p in tree(pid):
                    try:
                        total += p.memory_info().rss
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        pass
            self.peak = max(self.peak, total)
            self.stopped.wait(self.interval)

    def stop(self):
        self.stopped.set()
        self.join()


def scaling(bench, name, count):
    """count kernels at once: start all, one cell each, shut all down."""
    kms = []
    sampler = Sampler(lambda: [km.provisioner.pid for km in kms
                               if km.provisioner is not None and km.provisioner.pid])
    sampler.start()
    t0 = time.perf_counter()
    clients = []
    try:
        for _ in range(count):
            km = bench.manager(name)
            bench.start(km, name)
            kms.append(km)
        t_spawned = time.perf_counter() - t0
        for km in kms:
            client = Client(km, bench.ctx, channels=("shell",))
            clients.append((client, client.execute("1+1", user_expressions={"r": "1+1"})))
        for client, msg_id in clients:
            check_two(client.reply(msg_id, TIMEOUT * 2))
        t_ready = time.perf_counter() - t0
        at_ready = memory_of([p for km in kms for p in tree(km.provisioner.pid)])
    finally:
        for client, _ in clients:
            client.close()
        t_stop0 = time.perf_counter()
        # shutdown_kernel() one by one would wait for each in turn; ask all, then wait for all.
        for km in kms:
            try:
                km.request_shutdown()
            except Exception as e:  # noqa: BLE001
                log("request_shutdown:", e)
        for km in kms:
            try:
                km.finish_shutdown()
                km.cleanup_resources()
            except Exception as e:  # noqa: BLE001
                log("finish_shutdown:", e)
        sampler.stop()
    t_total = time.perf_counter() - t0
    return {"spawned_s": t_spawned, "ready_s": t_ready, "shutdown_s": time.perf_counter() - t_stop0,
            "total_s": t_total, "peak_rss": sampler.peak, "pss_at_ready": at_ready["pss"],
            "rss_at_ready": at_ready["rss"], "unreadable": at_ready["unreadable"]}


# ---------------------------------------------------------------------------------------------
# statistics and reporting


def median(xs):
    return statistics.median(xs) if xs else None


def p99(xs):
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]


def fmt_s(x):
    if x is None:
        return "—"
    return "%.1f ms" % (x * 1e3) if x < 1 else "%.2f s" % x


def fmt_mb(x):
    return "—" if x is None else "%.1f MB" % (x / 1e6)


def fmt_rate(seconds):
    return "—" if not seconds else "%.0f MB/s" % (DOWNLOAD_BYTES / 1e6 / seconds)


def fmt_ratio(x):
    return "—" if x is None else ("%.3f" % x if x < 0.1 else "%.2f" % x)


class Row:
    def __init__(self, key, figure, bj, ipk, fmt, target=None, note="", absolute=None):
        """target: max ratio belljar/ipykernel; absolute: (max value, text) on belljar alone."""
        self.key, self.figure, self.bj, self.ipk, self.fmt = key, figure, bj, ipk, fmt
        self.target, self.note, self.absolute = target, note, absolute
        self.ratio = bj / ipk if bj is not None and ipk else None

    def verdict(self):
        if self.absolute:
            limit, _ = self.absolute
            if self.bj is None:
                return "—"
            if self.bj <= limit:
                return "pass"
            return "MISS by %s (%.0f%% over)" % (self.fmt(self.bj - limit),
                                                  (self.bj / limit - 1) * 100)
        if self.target is None:
            return ""
        if self.ratio is None:
            return "—"
        if self.ratio <= self.target:
            return "pass"
        return "MISS by %.0f%% (ratio %s > %s)" % ((self.ratio / self.target - 1) * 100,
                                                   fmt_ratio(self.ratio), fmt_ratio(self.target))

    def target_text(self):
        if self.absolute:
            return self.absolute[1]
        if self.target is None:
            return "(info)"
        return "≤ %s" % fmt_ratio(self.target)

    def cells(self):
        return [self.key, self.figure, self.fmt(self.bj) if self.bj is not None else "—",
                self.fmt(self.ipk) if self.ipk is not None else "—", fmt_ratio(self.ratio),
                self.target_text(), self.verdict(), self.note]


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    return "\n".join(lines)


def text_table(header, rows):
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i])
              for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    return "\n".join(out)


def versions(selected):
    out = {"python": subprocess.run([PYTHON, "-c", "import sys; print(sys.version.split()[0])"],
                                    capture_output=True, text=True).stdout.strip()}
    ipk = subprocess.run([PYTHON, "-c", "import ipykernel, jupyter_client, zmq; "
                          "print(ipykernel.__version__, jupyter_client.__version__, "
                          "zmq.__version__, zmq.zmq_version())"],
                         capture_output=True, text=True).stdout.split()
    out["ipykernel"], out["jupyter_client"], out["pyzmq"], out["libzmq"] = (ipk + ["?"] * 4)[:4]
    if any(k.startswith("belljar") for k in selected):
        done = subprocess.run([BELLJAR, "--version"], capture_output=True, text=True)
        out["belljar"] = (done.stdout or done.stderr).strip()
    try:
        head = subprocess.run(["git", "-C", str(SOURCE), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(SOURCE), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True).stdout
        out["commit"] = head + (" + uncommitted changes" if dirty.strip() else "") if head else "?"
    except OSError:
        out["commit"] = "?"
    out["nproc"] = str(os.cpu_count())
    out["cpu"] = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                out["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    out["kernel"] = platform.release()
    out["load"] = "%.2f %.2f %.2f" % os.getloadavg()
    return out


# ---------------------------------------------------------------------------------------------


def belljar_answers(bench):
    """True when a strict belljar kernel starts and answers 1+1 (the script's precondition)."""
    try:
        bench.first_result("belljar")
        return True
    except Exception as e:  # noqa: BLE001
        log("belljar does not answer 1+1: %s" % e)
        log(bench.log_tail("belljar"))
        return False


def brokered_figure(bench, record, count):
    """Figure 11 (brokered.py): one kernel, the bound path and the plain tunnel interleaved
    in batches, so both see the same machine."""
    log("11. HTTPS request to 127.0.0.1: through a bound secret (TLS terminated) and through "
        "the plain tunnel (%d each)" % count)
    ca, leaf, key = brokered.make_ca_and_leaf(bench.tmp)
    server = brokered.start_https_server(leaf, key)
    port = server.server_port
    inside_ca = bench.workspace / "bench-ca.crt"  # *.pem would be masked in the workspace
    shutil.copy(ca, inside_ca)
    session = None
    try:
        bench.install_secret(port, ca)
        env = dict(bench.env)
        env[brokered.SECRET_NAME] = brokered.SECRET_VALUE
        session = bench.session("belljar-secret", env)
        client = session[1]
        client.run(brokered.BROKERED_CELL)
        calls = {"bound": ("localhost", port, None), "plain": ("127.0.0.1", port, str(inside_ca))}

        def measure(which, n, keep_alive):
            host, p, cafile = calls[which]
            expr = "_bench_https(%r, %d, %r, %d, %r)" % (host, p, cafile, n, keep_alive)
            reply, _, _ = client.run("", user_expressions={"r": expr})
            result = reply["content"]["user_expressions"]["r"]
            if result.get("status") != "ok":
                raise RuntimeError("figure 11 (%s): %s: %s" % (which, result.get("ename"),
                                                                result.get("evalue")))
            return eval(result["data"]["text/plain"])  # a list of seconds

        for which in calls:
            measure(which, 5, False)  # warm: imports, the leaf certificate, the resolver
        batch = 20
        for _ in range(max(1, count // batch)):
            for which in calls:
                for t in measure(which, batch, False):
                    record("belljar", "tls_" + which, t)
                for t in measure(which, batch, True):
                    record("belljar", "tls_keepalive_" + which, t)
    finally:
        if session:
            session[1].close()
            bench.stop(session[0])
        server.shutdown()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions (a smoke check)")
    ap.add_argument("--kernels", default=",".join(KERNELS),
                    help="comma-separated subset of %s" % ",".join(KERNELS))
    ap.add_argument("--output", default=str(HERE / "RESULTS.md"),
                    help="markdown report to write ('-' for none) [bench/RESULTS.md]")
    ap.add_argument("--json", help="also write every raw sample to this JSON file")
    ap.add_argument("--starts", type=int, help="repetitions of start/wait_for_ready [15; quick 3]")
    ap.add_argument("--round-trips", type=int, help="executes for the round trip [300; quick 60]")
    ap.add_argument("--reps", type=int, help="repetitions of restart/stream/interrupt [5; quick 1]")
    ap.add_argument("--scale", type=int, help="kernels at once in the scaling figure [20; quick 5]")
    ap.add_argument("--skip", default="", help="comma-separated figures to skip: "
                    "start,ready,roundtrip,restart,stream,interrupt,memory,scaling,egress,secrets")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (kernel logs, audit log)")
    args = ap.parse_args()

    quick = args.quick
    n_start = args.starts or (3 if quick else 15)
    n_rt = args.round_trips or (60 if quick else 300)
    n_rep = args.reps or (1 if quick else 5)
    n_stock = max(20, n_rt // 3)
    n_scale = args.scale or (5 if quick else 20)
    skip = set(filter(None, args.skip.split(",")))
    selected = [k for k in args.kernels.split(",") if k]
    for k in selected:
        if k not in KERNELS:
            ap.error("unknown kernel %r (choose from %s)" % (k, ", ".join(KERNELS)))
    if any(k.startswith("belljar") for k in selected) and not os.access(BELLJAR, os.X_OK):
        log("%s is missing: belljar kernels skipped" % BELLJAR)
        selected = [k for k in selected if not k.startswith("belljar")]
    if not selected:
        ap.error("no kernel to measure")

    main_kernels = [k for k in selected if k in ("belljar", "ipykernel")]
    bench = Bench(args)
    samples = {k: {} for k in selected}
    notes = []

    def record(kernel, figure, value):
        samples[kernel].setdefault(figure, []).append(value)

    started = datetime.datetime.now().astimezone()
    try:
        for k in selected:
            bench.install(k)
        if "belljar" in selected and not belljar_answers(bench):
            raise SystemExit("belljar's strict kernel did not answer 1+1; see the log above")
        # warm caches (page cache, .pyc, kernelspec lookups) before anything is timed
        for k in selected:
            if k != "belljar":
                bench.first_result(k)

        if "start" not in skip:
            log("1. start -> first result of 1+1 (%d reps)" % n_start)
            for _ in range(n_start):
                for k in selected:
                    record(k, "first_result", bench.first_result(k))
        if "ready" not in skip:
            log("1b. start -> wait_for_ready (%d reps)" % n_start)
            for _ in range(n_start):
                for k in main_kernels:
                    record(k, "wait_for_ready", bench.wait_for_ready(k))

        sessions = {}
        try:
            if not skip >= {"roundtrip", "memory", "stream", "interrupt", "restart"}:
                for k in selected:
                    sessions[k] = bench.session(k)
            if "roundtrip" not in skip:
                log("2. round trip of 1+1 (%d executes, in blocks of 50 alternating kernels)"
                    % n_rt)
                left = n_rt
                while left > 0:
                    block = min(50, left)
                    for k in selected:
                        samples[k].setdefault("round_trip", []).extend(
                            bench.round_trips(sessions[k][1], block))
                    left -= block
                log("2c. round trip through BlockingKernelClient (%d executes)" % n_stock)
                for k in main_kernels:
                    samples[k]["round_trip_stock"] = bench.stock_round_trips(*sessions[k], n_stock)
            # the variants are only for the cost columns (rows 1 and 2)
            for k in [k for k in list(sessions) if k not in main_kernels]:
                km, client = sessions.pop(k)
                client.close()
                bench.stop(km)
            if "memory" not in skip:
                log("6/7. memory after warm-up")
                for k in main_kernels:
                    km, client = sessions[k]
                    bench.warm_up(client)
                    time.sleep(1.0)  # let lazily started threads and buffers settle
                    procs = tree(km.provisioner.pid)
                    mem = memory_of(procs)
                    sup = memory_of(procs[:1])
                    record(k, "tree_pss", mem["pss"])
                    record(k, "tree_rss", mem["rss"])
                    record(k, "tree_uss", mem["uss"])
                    record(k, "kernel_proc_rss", sup["rss"])
                    record(k, "kernel_proc_pss", sup["pss"])
                    samples[k]["tree"] = label_roles(mem["procs"], k)
                    try:
                        samples[k]["kernel_proc_mappings"] = mappings(km.provisioner.pid)
                    except OSError as e:
                        notes.append("%s: could not read the kernel process's smaps: %s" % (k, e))
                    if mem["unreadable"]:
                        notes.append("%s: could not read %s" % (k, ", ".join(mem["unreadable"])))
            if "stream" not in skip:
                log("4. stream %d lines (%d reps)" % (STREAM_LINES, n_rep))
                for _ in range(n_rep):
                    for k in main_kernels:
                        t, got = bench.stream(sessions[k][1])
                        record(k, "stream", t)
                        record(k, "stream_lines", got["lines"])
                        record(k, "stream_messages", got["messages"])
            if "interrupt" not in skip:
                log("5. interrupt a busy loop (%d reps)" % n_rep)
                for _ in range(n_rep):
                    for k in main_kernels:
                        km, client = sessions[k]
                        try:
                            t, ename = bench.interrupt(km, client)
                        except TimeoutError:
                            notes.append("%s: an interrupt got no reply within %d s; the kernel "
                                         "was restarted" % (k, INTERRUPT_WAIT))
                            record(k, "interrupt_failed", 1)
                            client.close()
                            km.restart_kernel(now=True)
                            sessions[k] = (km, Client(km, bench.ctx))
                            sessions[k][1].settle()
                            continue
                        record(k, "interrupt", t)
                        record(k, "interrupt_ename", ename)
            if "restart" not in skip:
                log("3. restart -> first result (%d reps)" % n_rep)
                for _ in range(n_rep):
                    for k in main_kernels:
                        km, client = sessions[k]
                        elapsed, returned = bench.restart(km, client, k)
                        record(k, "restart", elapsed)
                        record(k, "restart_call", returned)
                        sessions[k] = (km, Client(km, bench.ctx))
        finally:
            for km, client in sessions.values():
                client.close()
                bench.stop(km)

        if "scaling" not in skip:
            for k in [k for k in ("belljar", "ipykernel") if k in selected]:
                log("8. %d %s kernels at once" % (n_scale, k))
                s = scaling(bench, k, n_scale)
                for key, value in s.items():
                    if key == "unreadable":
                        if value:
                            notes.append("%s scaling: could not read %s" % (k, ", ".join(value)))
                    else:
                        record(k, "scale_" + key, value)
        if "egress" not in skip and "belljar" in selected and "ipykernel" in selected:
            n_dl = max(3, n_rep)
            log("10. %d MB download: belljar through its egress proxy, ipykernel directly (%d reps)"
                % (DOWNLOAD_BYTES // 10**6, n_dl))
            server = start_download_server()
            url = "http://127.0.0.1:%d/download" % server.server_port
            dl = {}
            try:
                bench.install_egress(server.server_port)
                for k in ("belljar-egress", "ipykernel"):
                    dl[k] = bench.session(k)
                    dl[k][1].run(DOWNLOAD_CELL)
                    bench.download(dl[k][1], url, k == "ipykernel")  # warm: imports, buffers
                for _ in range(n_dl):
                    record("belljar", "download", bench.download(dl["belljar-egress"][1], url, False))
                    record("ipykernel", "download", bench.download(dl["ipykernel"][1], url, True))
            finally:
                for km, client in dl.values():
                    client.close()
                    bench.stop(km)
                server.shutdown()
        if "secrets" not in skip and "belljar" in selected:
            brokered_figure(bench, record, 40 if quick else 200)
        files = sorted((bench.state / "belljar").glob("audit-*.jsonl"))
        if files:
            notes.append("the default audit log: %d files, %d bytes in all, in the state directory"
                         % (len(files), sum(f.stat().st_size for f in files)))
    except BaseException:
        for k in selected:
            tail = bench.log_tail(k)
            if tail:
                log("--- %s stderr (tail) ---\n%s" % (k, tail))
        raise
    finally:
        bench.close()

    info = versions(selected)
    info["date"] = started.strftime("%Y-%m-%d %H:%M %Z")
    info["N"] = ("starts %d, round trips %d (stock client %d), restart/stream/interrupt %d, "
                 "scaling %d kernels" % (n_start, n_rt, n_stock, n_rep, n_scale))
    info["n_scale"] = n_scale
    write_outputs(build_report(samples, info, notes, quick), args,
                  {"info": info, "samples": samples, "notes": notes})


def write_outputs(report, args, raw):
    """The report to stdout and to --output (unless "-"), every raw sample to --json if asked."""
    print(report["text"])
    if args.output != "-":
        pathlib.Path(args.output).write_text(report["markdown"])
        log("wrote", args.output)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(raw, indent=1, default=str))
        log("wrote", args.json)


def header_lines(info):
    """The report's header: date, machine, load, versions, repetition counts (info: versions()
    plus "date" and "N"; "load_start" if the caller took the load average at the start too)."""
    load = "load average at the end: %(load)s" % info
    if info.get("load_start"):
        load = "load average at the start: %s, at the end: %s" % (info["load_start"], info["load"])
    return ["date: %(date)s" % info,
            "nproc: %s (%s), Linux %s, %s" % (info["nproc"], info["cpu"], info["kernel"], load),
            "belljar: %s (source %s)" % (info.get("belljar", "not measured"),
                                         info.get("commit", "?")),
            "ipykernel %(ipykernel)s, jupyter_client %(jupyter_client)s, pyzmq %(pyzmq)s "
            "(libzmq %(libzmq)s), Python %(python)s (/usr/bin/python3)" % info,
            "repetitions: %(N)s" % info]


def build_report(samples, info, notes, quick):
    def get(kernel, figure, stat=median):
        xs = samples.get(kernel, {}).get(figure)
        return stat(xs) if xs else None

    bj, ipk = "belljar", "ipykernel"
    lines_bj, lines_ipk = get(bj, "stream_lines", min), get(ipk, "stream_lines", min)
    delivered = "lines received (min over reps): belljar %s, ipykernel %s of %d" % (
        lines_bj if lines_bj is not None else "—", lines_ipk if lines_ipk is not None else "—",
        STREAM_LINES)
    enames = {k: sorted(set(samples.get(k, {}).get("interrupt_ename", []) or [])) for k in (bj, ipk)}
    rows = [
        Row("1", "start → first result of `1+1` (median)", get(bj, "first_result"),
            get(ipk, "first_result"), fmt_s, 0.15),
        Row("1b", "start → `wait_for_ready()` returns (median)", get(bj, "wait_for_ready"),
            get(ipk, "wait_for_ready"), fmt_s, None,
            "not a target: the stock readiness check (kernel_info, then up to 0.2 s for an iopub "
            "message, repeated until one comes) reports later than the kernel is ready"),
        Row("2", "execute round trip of `1+1`, median (reply + idle)", get(bj, "round_trip"),
            get(ipk, "round_trip"), fmt_s, 0.5),
        Row("2b", "execute round trip of `1+1`, p99", get(bj, "round_trip", p99),
            get(ipk, "round_trip", p99), fmt_s, None),
        Row("2c", "round trip through jupyter_client's BlockingKernelClient, median",
            get(bj, "round_trip_stock"), get(ipk, "round_trip_stock"), fmt_s, None,
            "the stock client's own overhead (asyncio per call) dilutes the ratio"),
        Row("3", "restart_kernel(now=False) → first result (median)", get(bj, "restart"),
            get(ipk, "restart"), fmt_s, 0.15,
            "restart_kernel() itself returned after: belljar %s, ipykernel %s (shutdown request, "
            "exit polled every 0.1 s by jupyter_client, new process spawned)" % (
                fmt_s(get(bj, "restart_call")), fmt_s(get(ipk, "restart_call")))),
        Row("4", "print %dk lines → idle (median)" % (STREAM_LINES // 1000), get(bj, "stream"),
            get(ipk, "stream"), fmt_s, 0.2,
            "≥ 5× faster; belljar runs with --output-limit %s; %s" % (OUTPUT_LIMIT, delivered)),
        Row("5", "interrupt `while True: pass` → reply (median)", get(bj, "interrupt"),
            get(ipk, "interrupt"), fmt_s, 1.0,
            "ename: belljar %s, ipykernel %s" % ("/".join(enames[bj]) or "—",
                                                 "/".join(enames[ipk]) or "—")),
        Row("6", "memory of the kernel's process tree after warm-up (PSS)", get(bj, "tree_pss"),
            get(ipk, "tree_pss"), fmt_mb, 0.4),
        Row("6b", "same, summed RSS: the kernel tree resident (counts shared pages once per "
            "process)", get(bj, "tree_rss"), get(ipk, "tree_rss"), fmt_mb, 0.35),
        Row("7", "the kernel process alone (RSS; belljar: the supervisor)",
            get(bj, "kernel_proc_rss"), get(ipk, "kernel_proc_rss"), fmt_mb, None,
            "per mapping: see \"The kernel process, mapping by mapping\"",
            absolute=(10e6, "≤ 10 MB")),
        Row("7b", "the kernel process alone (PSS; belljar: the supervisor)",
            get(bj, "kernel_proc_pss"), get(ipk, "kernel_proc_pss"), fmt_mb, None,
            "shared libraries split between the processes mapping them",
            absolute=(4e6, "≤ 4 MB")),
        Row("8", "%d kernels at once: start all, `1+1` each, shut down all (wall)" % info["n_scale"],
            get(bj, "scale_total_s"), get(ipk, "scale_total_s"), fmt_s, None,
            "all answered after: belljar %s, ipykernel %s; shutdown: belljar %s, ipykernel %s" % (
                fmt_s(get(bj, "scale_ready_s")), fmt_s(get(ipk, "scale_ready_s")),
                fmt_s(get(bj, "scale_shutdown_s")), fmt_s(get(ipk, "scale_shutdown_s")))),
        Row("8b", "… peak summed RSS (sampled every 0.25 s)", get(bj, "scale_peak_rss"),
            get(ipk, "scale_peak_rss"), fmt_mb, None,
            "PSS once all answered: belljar %s, ipykernel %s" % (
                fmt_mb(get(bj, "scale_pss_at_ready")), fmt_mb(get(ipk, "scale_pss_at_ready")))),
        Row("10", "%d MB download from a server on 127.0.0.1: belljar through its egress proxy, "
            "ipykernel directly (median)" % (DOWNLOAD_BYTES // 10**6), get(bj, "download"),
            get(ipk, "download"), fmt_s, 2.0,
            "rate: belljar %s, ipykernel %s; belljar gets %s of the direct rate (target ≥ 0.5, "
            "i.e. time ratio ≤ 2)" % (fmt_rate(get(bj, "download")), fmt_rate(get(ipk, "download")),
                                     fmt_ratio(get(ipk, "download") / get(bj, "download"))
                                     if get(bj, "download") and get(ipk, "download") else "—")),
    ]
    brokered_lines = []
    fresh = (get(bj, "tls_bound"), get(bj, "tls_plain"))
    kept = (get(bj, "tls_keepalive_bound"), get(bj, "tls_keepalive_plain"))
    if None not in fresh:
        extra = (fresh[0] - fresh[1]) * 1e3
        brokered_lines = [
            "11. an HTTPS request to a stand-in on 127.0.0.1, a fresh connection each (median of "
            "%d): through a bound secret (TLS terminated, value put in, response scrubbed) %s, "
            "through the plain tunnel %s: %+.2f ms (target ≤ +2 ms: %s)" % (
                len(samples[bj]["tls_bound"]), fmt_s(fresh[0]), fmt_s(fresh[1]), extra,
                "met" if extra <= 2.0 else "MISSED by %.2f ms" % (extra - 2.0))]
        if None not in kept:
            brokered_lines.append(
                "11b. the same on one keep-alive connection: bound %s, plain %s: %+.2f ms per "
                "request" % (fmt_s(kept[0]), fmt_s(kept[1]), (kept[0] - kept[1]) * 1e3))
    header = ["#", "figure", "belljar", "ipykernel", "ratio bj/ipk", "target", "result", "note"]
    main_rows = [r.cells() for r in rows if r.bj is not None or r.ipk is not None]

    cost_kernels = [k for k in ("belljar", "belljar-none", "belljar-audit") if k in samples]
    cost_rows = []
    base = {f: get("belljar", f) for f in ("first_result", "round_trip")}
    for k in cost_kernels:
        cells = [KERNELS[k][0]]
        for f in ("first_result", "round_trip"):
            v = get(k, f)
            cells.append(fmt_s(v))
            cells.append("—" if k == "belljar" or v is None or base[f] is None
                         else "%+.1f ms" % ((base[f] - v) * 1e3 if k == "belljar-none"
                                            else (v - base[f]) * 1e3))
        cost_rows.append(cells)
    cost_header = ["kernel", "first result", "Δ", "round trip", "Δ"]

    tree_lines = []
    for k in (bj, ipk):
        for p in samples.get(k, {}).get("tree", []):
            tree_lines.append("%s %s: pid %d %s (uid %s): RSS %s, PSS %s, USS %s" % (
                k, p.get("role", "?"), p["pid"], p["name"], p.get("uids", "?"), fmt_mb(p["rss"]),
                fmt_mb(p["pss"]), fmt_mb(p["uss"])))
    map_lines = {k: mapping_lines(samples[k]["kernel_proc_mappings"])
                 for k in (bj, ipk) if samples.get(k, {}).get("kernel_proc_mappings")}

    banner = "QUICK RUN (low repetition counts: indicative only)\n" if quick else ""
    info_lines = header_lines(info)
    text = [banner + "\n".join(info_lines), "", text_table(header, main_rows)]
    if cost_rows:
        text += ["", "cost of the sandbox and of the audit log (Δ: what the layer costs; "
                     "medians):", text_table(cost_header, cost_rows)]
    if tree_lines:
        text += ["", "process trees after warm-up:"] + ["  " + t for t in tree_lines]
    for k, lines in map_lines.items():
        text += ["", "%s: the kernel process by mapping (/proc/PID/smaps):" % k] + \
            ["  " + line for line in lines]
    if brokered_lines:
        text += ["", "bound secrets (belljar alone, both paths in one kernel):"] + \
            ["  " + line for line in brokered_lines]
    if notes:
        text += ["", "notes:"] + ["  " + n for n in notes]

    md = ["# belljar vs ipykernel — benchmark results", ""]
    if quick:
        md += ["**Quick run** (low repetition counts): indicative only.", ""]
    md += ["Produced by `bench/bench.py` (method: `bench/README.md`). Ratios are belljar ÷ "
           "ipykernel of the medians; a target is met when the ratio is at or under it.", ""]
    md += ["- " + line for line in info_lines] + [""]
    md += [markdown_table(header, main_rows), ""]
    if cost_rows:
        md += ["## Cost of the sandbox and of the audit log", "",
               "Same figures as rows 1 and 2 for belljar in three configurations. Δ for "
               "`--isolation none` is what the strict sandbox costs (strict − none); Δ for "
               "`--audit-log -` is what sending the audit records to stderr (which the bench "
               "sends to a file) costs over the default, a file per kernel in the state "
               "directory.", "",
               markdown_table(cost_header, cost_rows), ""]
    if brokered_lines:
        md += ["## What a bound secret costs a request", "",
               "One belljar kernel reaches the same HTTPS stand-in by the name a secret is bound "
               "to (the proxy terminates TLS) and by its address (the plain end-to-end tunnel), "
               "in interleaved batches (`bench/brokered.py`).", ""] + \
            ["- " + line for line in brokered_lines] + [""]
    if tree_lines:
        md += ["## Process trees after warm-up", ""] + ["- " + t for t in tree_lines] + [""]
    if map_lines:
        md += ["## The kernel process, mapping by mapping", "",
               "Rows 7 and 7b taken apart: RSS and PSS of the kernel process (belljar: the "
               "supervisor) per mapped file, from `/proc/PID/smaps` after the warm-up; anonymous "
               "memory is `[anon]` and `[heap]`.", ""]
        for k, lines in map_lines.items():
            md += ["%s:" % k, ""] + ["- " + line for line in lines] + [""]
    if notes:
        md += ["## Notes", ""] + ["- " + n for n in notes] + [""]
    return {"text": "\n".join(text), "markdown": "\n".join(md)}


if __name__ == "__main__":
    main()
