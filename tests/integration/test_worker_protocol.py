"""The belljar worker (worker/belljar_worker), driven the way the supervisor drives it.

The worker is started exactly as the supervisor starts it: `python -s -E -c <bootstrap>`,
a socketpair on fd 3 for frames, pipes on fd 1 and fd 2, /dev/null on fd 0. The harness
below reads the pipes before each frame, as the supervisor does, so ordering is checked.
"""
import base64
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

PYTHON = "/usr/bin/python3"
SOURCE = Path(os.environ.get("BELLJAR_SOURCE") or Path(__file__).resolve().parents[2])
# The build tree's copy of the package, with the bytecode the build compiled (what belljar runs).
WORKER_DIR = Path(os.environ.get("BELLJAR_WORKER") or SOURCE / "worker")
BOOTSTRAP = ("import sys; sys.path.insert(0, %r); "
             "from belljar_worker.main import serve; serve()" % str(WORKER_DIR))


class Worker:
    def __init__(self, python=PYTHON, interpreter_flags=(), cwd=None, debug_channel=False,
                 address_space=None):
        # A directory of its own: the host's /tmp (thousands of entries on a CI machine) made
        # IPython's `import` completion, which lists the working directory, take over 30 s.
        self._own_cwd = None if cwd else tempfile.mkdtemp(prefix="belljar-worker-cwd-")
        ours, theirs = socket.socketpair()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        fd = theirs.fileno()
        # fd 4, the debug channel, as the supervisor gives it (debugger/debug_channel.py).
        self.debug, debug_theirs = socket.socketpair() if debug_channel else (None, None)
        debug_fd = debug_theirs.fileno() if debug_theirs else None

        def place_channels():
            os.dup2(fd, 3)
            if debug_fd is not None:
                os.dup2(debug_fd, 4)
            if address_space is not None:  # --memory as the sandbox sets it without a cgroup
                resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

        self.proc = subprocess.Popen(
            [python, *interpreter_flags, "-s", "-E", "-c", BOOTSTRAP],
            stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
            pass_fds=(fd, 3) + ((debug_fd, 4) if debug_theirs else ()),
            preexec_fn=place_channels, cwd=cwd or self._own_cwd)
        theirs.close()
        if debug_theirs:
            debug_theirs.close()
        os.close(out_w)
        os.close(err_w)
        self.sock, self.out, self.err = ours, out_r, err_r
        self.pipes = {out_r: "stdout", err_r: "stderr"}
        self.pipe_bytes = {out_r: 0, err_r: 0}
        self.last_written = None  # the cursor of the last frame: [fd 1, fd 2] bytes
        self.events = []  # ("stdout"|"stderr", text) and ("frame", dict), in arrival order
        self._seen = 0
        self.hello = self.next_frame(timeout=10)

    # -- transport ---------------------------------------------------------------------
    def send(self, msg):
        data = json.dumps(msg).encode()
        self.sock.sendall(len(data).to_bytes(4, "big") + data)

    def _drain_pipes(self, wait=0.0):
        """Read what the pipes hold now, once: reading on until they are empty could take
        text the worker wrote after the frame that is about to be handled."""
        fds = [fd for fd in self.pipes if fd is not None]
        ready, _, _ = select.select(fds, [], [], wait)
        for fd in fds:
            if fd in ready:
                chunk = os.read(fd, 1 << 20)
                self.pipe_bytes[fd] += len(chunk)
                if chunk:
                    self.events.append((self.pipes[fd], chunk.decode("utf-8", "replace")))

    def _read_pipes_to(self, written):
        """Read fd 1/2 until as many bytes as the frame's cursor counts have come."""
        for fd, target in zip((self.out, self.err), written):
            while self.pipe_bytes[fd] < target:
                chunk = os.read(fd, target - self.pipe_bytes[fd])
                if not chunk:
                    break
                self.pipe_bytes[fd] += len(chunk)
                self.events.append((self.pipes[fd], chunk.decode("utf-8", "replace")))

    def _read_exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError("worker closed fd 3")
            data += chunk
        return data

    def next_frame(self, timeout=30):
        """The next frame; like the supervisor, pipes are drained before it is handled."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame within %ss; events: %r" % (timeout, self.events[-5:]))
            ready, _, _ = select.select([self.sock, self.out, self.err], [], [], left)
            if self.sock in ready:
                self._drain_pipes()
                size = int.from_bytes(self._read_exact(4), "big")
                frame = json.loads(self._read_exact(size))
                # The cursor is transport, like the length: the harness reads the pipes up to
                # it, as the supervisor does, and the frame is kept without it.
                written = frame.pop("written", None)
                self.last_written = written
                if frame["type"] != "hello":
                    assert isinstance(written, list) and len(written) == 2, frame
                    self._read_pipes_to(written)
                self.events.append(("frame", frame))
                return frame
            self._drain_pipes()

    # -- requests ----------------------------------------------------------------------
    def start_execute(self, code, **fields):
        msg = {"type": "execute", "id": fields.pop("id", "e%d" % len(self.events)), "code": code,
               "silent": False, "store_history": True, "user_expressions": {},
               "allow_stdin": False, "execution_count": fields.pop("execution_count", 1)}
        msg.update(fields)
        self._seen = len(self.events)
        self.send(msg)
        return msg["id"]

    def finish_execute(self, timeout=30):
        while True:
            frame = self.next_frame(timeout)
            if frame["type"] == "done":
                self._drain_pipes()  # the worker flushed its streams before `done`
                return Cell(self.events[self._seen:])

    def execute(self, code, timeout=30, **fields):
        self.start_execute(code, **fields)
        return self.finish_execute(timeout)

    def request(self, msg, reply_type, timeout=30):
        self.send(msg)
        while True:
            frame = self.next_frame(timeout)
            if frame["type"] == reply_type:
                return frame

    def interrupt(self):
        os.kill(self.proc.pid, signal.SIGINT)

    def wait_for_output(self, needle, timeout=30):
        """Until the running cell has printed `needle` on stdout: the point a test waits for,
        never a time. TimeoutError after `timeout` (the cell never got there)."""
        deadline = time.monotonic() + timeout
        while not any(k == "stdout" and needle in v for k, v in self.events[self._seen:]):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no %r within %ss; events: %r" % (needle, timeout,
                                                                     self.events[-5:]))
            self._drain_pipes(wait=min(left, 1.0))

    def close(self):
        self.sock.close()
        if self.debug is not None:
            self.debug.close()
        try:
            return self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            for fd in (self.out, self.err):
                os.close(fd)
            if self._own_cwd:
                shutil.rmtree(self._own_cwd, ignore_errors=True)


class Cell:
    def __init__(self, events):
        self.events = events
        self.frames = [e[1] for e in events if e[0] == "frame"]
        self.done = self.frames[-1]
        self.stdout = "".join(text for kind, text in events if kind == "stdout")
        self.stderr = "".join(text for kind, text in events if kind == "stderr")

    def of_type(self, kind):
        return [f for f in self.frames if f["type"] == kind]

    @property
    def result(self):
        results = self.of_type("result")
        return results[0]["data"] if results else None

    @property
    def error(self):
        errors = self.of_type("error")
        return errors[0] if errors else None

    @property
    def ok(self):
        return self.done["status"] == "ok"


def png_bytes(b64):
    return base64.b64decode(b64)


# ---------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain(text):
    return ANSI.sub("", text)


@pytest.fixture
def worker():
    w = Worker()
    yield w
    w.close()


def interpreter_version(python=PYTHON):
    return subprocess.check_output(
        [python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"], text=True).strip()


def test_hello_reports_the_interpreter(worker):
    hello = worker.hello
    assert hello["type"] == "hello"
    info = hello["language_info"]
    assert info["name"] == "python"
    assert info["version"] == interpreter_version()
    assert info["mimetype"] == "text/x-python" and info["file_extension"] == ".py"
    assert hello["pid"] == worker.proc.pid
    assert "Python" in hello["banner"]


def test_state_is_kept_across_cells_like_ipython(worker):
    assert worker.execute("x = 41", execution_count=1).ok
    cell = worker.execute("x + 1", execution_count=2)
    assert cell.result == {"text/plain": "42"}
    cell = worker.execute("(__name__, _, _2, Out[2], In[2], __builtins__.__name__)",
                          execution_count=3)
    assert cell.result["text/plain"] == "('__main__', 42, 42, 42, 'x + 1', 'builtins')"
    # classes defined in cells pickle, which needs sys.modules['__main__'] to be the namespace
    cell = worker.execute("import pickle\nclass P: pass\ntype(pickle.loads(pickle.dumps(P()))).__name__",
                          execution_count=4)
    assert cell.result == {"text/plain": "'P'"}


def test_result_of_last_expression(worker):
    cell = worker.execute("1 + 1")
    assert cell.ok and cell.result == {"text/plain": "2"}
    assert worker.execute("1 + 1;").result is None  # a trailing ';' hides the value
    assert worker.execute("None").result is None
    assert worker.execute("y = 3").result is None
    long_list = worker.execute("list(range(30))").result["text/plain"]
    assert long_list.startswith("[0,\n 1,\n 2,")  # pretty-printed, one item per line


def test_silent_and_store_history(worker):
    worker.execute("5", execution_count=1)
    cell = worker.execute("6", silent=True, execution_count=2)
    assert cell.result is None and cell.ok
    cell = worker.execute("7", store_history=False, execution_count=2)
    assert cell.result == {"text/plain": "7"}
    cell = worker.execute("(_, sorted(Out))", execution_count=2)
    assert cell.result["text/plain"] == "(5, [1])"


def test_print_and_displays_keep_their_order(worker):
    code = ("class H:\n"
            "    def _repr_html_(self): return '<b>h</b>'\n"
            "print('before')\n"
            "display(H())\n"
            "print('after')\n"
            "import sys; print('err', file=sys.stderr)\n")
    cell = worker.execute(code)
    order = [(k, v if k != "frame" else v["type"]) for k, v in cell.events]
    before = order.index(("stdout", "before\n"))
    shown = order.index(("frame", "display"))
    after = order.index(("stdout", "after\n"))
    assert before < shown < after, order
    assert cell.of_type("display")[0]["data"]["text/html"] == "<b>h</b>"
    assert "err\n" in cell.stderr


def test_output_of_a_long_cell_arrives_while_it_runs(worker, tmp_path):
    # The cell cannot finish before the test lets it (a FIFO it reads until the test writes):
    # 'tick' must have arrived while it still runs.
    go = tmp_path / "go"
    os.mkfifo(go)
    worker.start_execute(f"print('tick')\nopen({str(go)!r}).read()\nprint('tock')")
    worker.wait_for_output("tick")
    assert not any(k == "frame" for k, _ in worker.events[worker._seen:])  # still running
    with open(go, "w") as release:
        release.write("go")
    cell = worker.finish_execute()
    assert "tock" in cell.stdout


def test_printing_200k_lines_arrives_whole(worker):
    # How fast is bench/bench.py's figure 4 (200k lines, side by side with ipykernel).
    cell = worker.execute("for i in range(200000): print(i)")
    assert cell.ok
    assert cell.stdout.count("\n") == 200000 and cell.stdout.endswith("199999\n")


def test_errors_become_error_frames_without_worker_frames(worker):
    cell = worker.execute("def f():\n    return 1/0\nf()", execution_count=7)
    assert not cell.ok and cell.done["status"] == "error"
    error = cell.error
    assert error["ename"] == "ZeroDivisionError" and error["evalue"] == "division by zero"
    text = plain("\n".join(error["traceback"]))
    assert "Cell In[7], line 3" in text and "return 1/0" in text
    assert "belljar_worker" not in text and "runner.py" not in text
    syntax = worker.execute("1 +").error
    assert syntax["ename"] == "SyntaxError"
    assert "belljar_worker" not in "".join(syntax["traceback"])
    assert worker.execute("1 + 1").result == {"text/plain": "2"}  # still alive


def test_exit_and_broken_reprs_do_not_kill_the_worker(worker):
    cell = worker.execute("import sys; sys.exit(3)")
    assert cell.error["ename"] == "SystemExit"
    assert worker.execute("21 * 2").result == {"text/plain": "42"}


def test_a_repr_that_raises_is_shown_and_fails_only_the_cells_own_value(worker):
    """As IPython's formatter (ipykernel 7, before IPython is loaded too): the failing repr
    method's traceback is shown and its format skipped. Formatting the cell's value, that
    fails the cell; in display(), the cell goes on."""
    worker.execute("class B:\n    def __repr__(self): raise ValueError('nope')\n"
                   "class C:\n    def _repr_html_(self): 1/0", execution_count=3)
    cell = worker.execute("B()")
    assert not cell.ok and cell.result is None
    assert (cell.error["ename"], cell.error["evalue"], cell.error["fails_cell"]) == (
        "ValueError", "nope", True)
    assert "Cell In[3], line 2" in plain("\n".join(cell.error["traceback"]))
    cell = worker.execute("C()")
    assert not cell.ok and cell.error["ename"] == "ZeroDivisionError"
    assert list(cell.result) == ["text/plain"] and cell.result["text/plain"].startswith("<__main__.C object")
    cell = worker.execute("display(B())\ndisplay(C())\nprint('went on')")
    assert cell.ok and cell.stdout == "went on\n" and cell.stderr == ""
    assert [(e["ename"], e["fails_cell"]) for e in cell.of_type("error")] == [
        ("ValueError", False), ("ZeroDivisionError", False)]
    assert [list(d["data"]) for d in cell.of_type("display")] == [["text/plain"]]


def test_sigint_interrupts_a_busy_cell_and_is_ignored_when_idle(worker):
    worker.start_execute("print('busy', flush=True)\nwhile True: pass")
    worker.wait_for_output("busy")
    worker.interrupt()
    cell = worker.finish_execute(timeout=10)
    assert cell.error["ename"] == "KeyboardInterrupt" and cell.done["status"] == "error"
    worker.interrupt()  # idle
    # A request answered after the signal was sent: the worker took the signal (Python runs
    # its handler before the next bytecode after the read it was blocked in) and lives.
    worker.request({"type": "is_complete", "id": "after-sigint", "code": "1"}, "is_complete_reply")
    assert worker.proc.poll() is None
    assert worker.execute("'alive'").result == {"text/plain": "'alive'"}
    worker.start_execute("import time\nprint('sleeping', flush=True)\ntime.sleep(30)")
    worker.wait_for_output("sleeping")
    worker.interrupt()
    assert worker.finish_execute(timeout=10).error["ename"] == "KeyboardInterrupt"


def test_every_frame_of_a_request_carries_its_id_threads_included(worker):
    cell = worker.execute("import threading\n"
                          "t = threading.Thread(target=lambda: display('from a thread'))\n"
                          "t.start(); t.join()\n"
                          "display('x'); 1 + 1\n", id="req-7")
    kinds = [f["type"] for f in cell.frames]
    assert kinds == ["display", "display", "result", "done"], kinds
    assert all(f["id"] == "req-7" for f in cell.frames), cell.frames
    cell = worker.execute("raise ValueError('v')", id="req-8")
    assert [f["id"] for f in cell.frames] == ["req-8", "req-8"]
    reply = worker.request({"type": "is_complete", "id": "req-9", "code": "x = ("}, "is_complete_reply")
    assert reply["id"] == "req-9"


def test_input_round_trip(worker):
    cell_id = worker.start_execute("name = input('who? ')\nprint('hello', name)", allow_stdin=True)
    request = worker.next_frame()
    assert request == {"type": "input_request", "id": cell_id, "prompt": "who? ", "password": False}
    worker.send({"type": "input_reply", "value": "ada"})
    cell = worker.finish_execute()
    assert cell.ok and cell.stdout == "hello ada\n"  # the prompt is not printed
    worker.start_execute("import getpass\nsecret = getpass.getpass()", allow_stdin=True)
    request = worker.next_frame()
    assert request["type"] == "input_request" and request["password"] is True
    worker.send({"type": "input_reply", "value": "s3cret"})
    assert worker.finish_execute().ok
    assert worker.execute("secret").result == {"text/plain": "'s3cret'"}
    worker.start_execute("input()", allow_stdin=True)
    worker.next_frame()
    worker.send({"type": "input_reply", "error": "stdin is closed"})
    assert worker.finish_execute().error["ename"] == "EOFError"


INTERRUPT_IN_IMPORTLIB = """
import signal, sys, threading
sys.path.insert(0, %r)
from belljar_worker.interrupts import InterruptGate
gate = InterruptGate()
signal.signal(signal.SIGINT, gate.handle_sigint)
gate.enter_user_code()

class Finder:
    # Called by importlib's own frames: the interrupt lands there, as one can in a cell.
    def find_spec(self, name, path=None, target=None):
        if name == "belljar_probe_module":
            gate.handle_sigint(signal.SIGINT, sys._getframe(1))
            print("not raised inside importlib:", sys._getframe(1).f_code.co_filename, flush=True)
        return None

sys.meta_path.insert(0, Finder())
try:
    import belljar_probe_module
except ModuleNotFoundError:
    pass
try:
    threading.Event().wait(60)
    print("the interrupt was lost")
except KeyboardInterrupt:
    print("interrupted after the import")
"""


def test_an_interrupt_inside_the_import_machinery_is_delivered_after_it():
    """A SIGINT whose handler runs in importlib's frames (where Python may swallow what it
    raises: CI saw one lost in a module lock's weakref callback while input() waited) comes
    again once the import is over, and the cell is interrupted."""
    done = subprocess.run([PYTHON, "-c", INTERRUPT_IN_IMPORTLIB % str(WORKER_DIR)],
                          capture_output=True, text=True, timeout=90)
    assert done.stdout.splitlines() == [
        "not raised inside importlib: <frozen importlib._bootstrap>",
        "interrupted after the import"], (done.stdout, done.stderr)


# A SIGINT whose C handler runs on a thread of the user's while the main thread already sleeps:
# Python runs the handler on the main thread only at its next bytecode, after the sleep. (The
# same happens to one that lands while the main thread waits for the GIL just before a blocking
# call: CI lost a debugger test's interrupt that way, under load.)
SIGINT_TO_A_USERS_THREAD = """
import platform, signal, threading, time
CLOCK_NANOSLEEP = {"x86_64": "230 ", "aarch64": "115 "}[platform.machine()]
main = threading.get_native_id()

def poke():
    with open("/proc/self/task/%d/syscall" % main) as f:
        while not f.read().startswith(CLOCK_NANOSLEEP):  # until the main thread sleeps
            f.seek(0)
            time.sleep(0.01)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)

threading.Thread(target=poke, daemon=True).start()
print("sleeping", flush=True)
time.sleep(60)
"""


def test_an_interrupt_that_reaches_another_thread_still_ends_the_cells_sleep(worker):
    worker.start_execute(SIGINT_TO_A_USERS_THREAD)
    cell = worker.finish_execute(timeout=30)
    assert cell.stdout == "sleeping\n" and cell.error["ename"] == "KeyboardInterrupt"
    assert worker.execute("'alive'").result == {"text/plain": "'alive'"}


def test_an_interrupt_is_delivered_once(worker):
    """The worker sends a SIGINT again only while its handler has not run: a cell that catches
    the first and then works on for longer than that wait is not interrupted a second time."""
    # The text by os.write in the try: an interrupt the harness sends once it sees the text
    # lands in the try (after a print, it could land in print's own last steps).
    worker.start_execute("import os, time\ntry:\n    os.write(1, b'sleeping\\n')\n"
                         "    time.sleep(60)\nexcept KeyboardInterrupt:\n    time.sleep(1.5)\n"
                         "    print('caught once')")
    worker.wait_for_output("sleeping")
    worker.interrupt()
    cell = worker.finish_execute(timeout=30)
    assert cell.ok and cell.stdout == "sleeping\ncaught once\n", (cell.stdout, cell.error)


def test_a_cells_own_sigint_handler_runs_once_per_interrupt(worker):
    """The worker's watch for missed interrupts pokes only for its own handler: a cell's own
    one ran again every second, forever, when the watch sent SIGINT again (red team)."""
    worker.start_execute(
        "import signal, time\ncalls = []\nsignal.signal(signal.SIGINT, lambda *a: calls.append(1))\n"
        "print('installed', flush=True)\nwhile not calls:\n    time.sleep(0.01)\n"
        "time.sleep(2.5)\nprint(len(calls))")
    worker.wait_for_output("installed")
    worker.interrupt()
    cell = worker.finish_execute(timeout=30)
    assert cell.ok and cell.stdout == "installed\n1\n", (cell.stdout, cell.error)
    assert worker.execute("time.sleep(1.5)\nlen(calls)").result == {"text/plain": "1"}


def test_python_s_default_sigint_handler_in_a_cell_does_not_end_the_session(worker):
    """With Python's own handler put back by a cell, an interrupt is a KeyboardInterrupt it may
    catch; the session lives on (the watch's second SIGINT killed the worker between cells)."""
    assert worker.execute("import signal, time\nsignal.signal(signal.SIGINT, "
                          "signal.default_int_handler)\nkept = 42").ok
    worker.start_execute("import os\ntry:\n    os.write(1, b'sleeping\\n')\n    time.sleep(30)\n"
                         "except KeyboardInterrupt:\n    print('caught')")
    worker.wait_for_output("sleeping")
    worker.interrupt()
    cell = worker.finish_execute(timeout=30)
    assert cell.ok and cell.stdout == "sleeping\ncaught\n", (cell.stdout, cell.error)
    assert worker.execute("time.sleep(1.5)\nkept").result == {"text/plain": "42"}
    assert worker.proc.poll() is None


def test_input_without_stdin_and_interrupted_input(worker):
    cell = worker.execute("input('x')", allow_stdin=False)
    assert cell.error["ename"] == "StdinNotImplementedError"
    assert "does not support input requests" in cell.error["evalue"]
    worker.start_execute("input('wait')", allow_stdin=True)
    assert worker.next_frame()["type"] == "input_request"
    worker.interrupt()
    assert worker.finish_execute(timeout=10).error["ename"] == "KeyboardInterrupt"
    assert worker.execute("'after'").result == {"text/plain": "'after'"}


def test_complete(worker):
    worker.execute("import os\nmy_variable = 1\nclass K:\n    attribute_one = 1")
    reply = worker.request({"type": "complete", "id": "c1", "code": "my_va",
                            "cursor_pos": 5}, "complete_reply")
    assert reply["id"] == "c1" and reply["matches"] == ["my_variable"]
    assert (reply["cursor_start"], reply["cursor_end"]) == (0, 5)
    code = "x = os.pa"
    reply = worker.request({"type": "complete", "id": "c2", "code": code,
                            "cursor_pos": len(code)}, "complete_reply")
    assert "path" in reply["matches"] and "pardir" in reply["matches"]
    assert reply["cursor_start"] == len("x = os.") and reply["cursor_end"] == len(code)
    reply = worker.request({"type": "complete", "id": "c3", "code": "K.attr",
                            "cursor_pos": 6}, "complete_reply")
    assert reply["matches"] == ["attribute_one"] and reply["cursor_start"] == 2
    reply = worker.request({"type": "complete", "id": "c4", "code": "import jso",
                            "cursor_pos": 10}, "complete_reply")
    assert "json" in reply["matches"]
    reply = worker.request({"type": "complete", "id": "c5", "code": "whi",
                            "cursor_pos": 3}, "complete_reply")
    assert "while" in reply["matches"]


def test_inspect(worker):
    worker.execute("def greet(name, punctuation='!'):\n    '''Say hello.'''\n    return name")
    reply = worker.request({"type": "inspect", "id": "i1", "code": "greet",
                            "cursor_pos": 5, "detail_level": 0}, "inspect_reply")
    text = plain(reply["data"]["text/plain"])
    assert reply["found"] is True and reply["id"] == "i1"
    assert "greet(name, punctuation='!')" in text and "Say hello." in text
    reply = worker.request({"type": "inspect", "id": "i2", "code": "greet(",
                            "cursor_pos": 6, "detail_level": 1}, "inspect_reply")
    assert "return name" in plain(reply["data"]["text/plain"])  # the source
    reply = worker.request({"type": "inspect", "id": "i3", "code": "no_such_name",
                            "cursor_pos": 3, "detail_level": 0}, "inspect_reply")
    assert reply["found"] is False


@pytest.mark.parametrize("code,status,indent", [
    ("x = 1", "complete", ""),
    ("for i in range(3):", "incomplete", "    "),
    ("def f(a,", "incomplete", ""),
    ("1 +", "invalid", ""),
    ("%time x", "complete", ""),
    ("if x:\n    if y:", "incomplete", "        "),
])
def test_is_complete(worker, code, status, indent):
    reply = worker.request({"type": "is_complete", "id": "k", "code": code}, "is_complete_reply")
    assert reply["status"] == status
    if status == "incomplete":
        assert reply["indent"] == indent


def test_user_expressions(worker):
    cell = worker.execute("a = 6", user_expressions={"double": "a * 2", "bad": "1/0"})
    exprs = cell.done["user_expressions"]
    assert exprs["double"] == {"status": "ok", "data": {"text/plain": "12"}, "metadata": {}}
    assert exprs["bad"]["status"] == "error" and exprs["bad"]["ename"] == "ZeroDivisionError"
    assert isinstance(exprs["bad"]["traceback"], list)


def test_display_handles_update_in_place(worker):
    cell = worker.execute("h = display('first', display_id=True)\nh.update('second')")
    shown, updated = cell.of_type("display")[0], cell.of_type("update_display")[0]
    display_id = shown["transient"]["display_id"]
    assert display_id and updated["transient"]["display_id"] == display_id
    assert shown["data"]["text/plain"] == "'first'"
    assert updated["data"]["text/plain"] == "'second'"
    cell = worker.execute("from belljar_worker.display import clear_output\nclear_output(wait=True)")
    assert cell.of_type("clear_output") == [{"type": "clear_output", "wait": True, "id": cell.done["id"]}]


def test_rich_reprs(worker):
    code = ("class R:\n"
            "    def _repr_html_(self): return '<i>r</i>'\n"
            "    def _repr_png_(self): return b'\\x89PNG fake'\n"
            "    def _repr_markdown_(self): return ('*r*', {'isolated': True})\n"
            "R()")
    data = worker.execute(code).result
    assert data["text/html"] == "<i>r</i>" and data["text/markdown"] == "*r*"
    assert png_bytes(data["image/png"]) == b"\x89PNG fake"
    assert data["text/plain"].startswith("<__main__.R object")
    bundle = worker.execute("class M:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n"
                            "        return {'application/json': {'k': [1, 2]}, 'text/plain': 'M!'}\nM()").result
    assert bundle == {"application/json": {"k": [1, 2]}, "text/plain": "M!"}


def test_ipython_display_works_in_the_cell_that_imports_it(worker):
    cell = worker.execute("from IPython.display import display, HTML, Markdown\n"
                          "display(HTML('<b>bold</b>'))\n"
                          "Markdown('*md*')")
    assert cell.ok, cell.error
    assert cell.of_type("display")[0]["data"]["text/html"] == "<b>bold</b>"
    assert cell.result["text/markdown"] == "*md*"
    cell = worker.execute("from IPython.display import clear_output, update_display\n"
                          "h = display('a', display_id='fixed')\nupdate_display('b', display_id='fixed')\n"
                          "clear_output()")
    assert cell.of_type("update_display")[0]["transient"] == {"display_id": "fixed"}
    assert cell.of_type("clear_output") == [{"type": "clear_output", "wait": False, "id": cell.done["id"]}]


def test_line_magic_and_shell_escape(worker, tmp_path):
    cell = worker.execute("%time sum(range(10))")
    assert cell.ok and "Wall time" in cell.stdout and cell.result == {"text/plain": "45"}
    cell = worker.execute("!echo hi from the shell")
    assert cell.ok and "hi from the shell\n" in cell.stdout
    cell = worker.execute("%who")
    assert cell.ok and "In" not in cell.stdout.split() and "get_ipython" not in cell.stdout
    target = tmp_path / "writefile_test.txt"
    cell = worker.execute(f"%%writefile {target}\ncontent\n")
    assert cell.ok and target.read_text() == "content\n"
    cell = worker.execute("%timeit -n1 -r1 sum(range(10))")
    assert cell.ok and "per loop" in cell.stdout
    cell = worker.execute("plain_after_magic = 5\nplain_after_magic")
    assert cell.result == {"text/plain": "5"}
    assert worker.execute("%not_a_magic").error["ename"] == "UsageError"


def test_pinfo_goes_to_a_pager_payload(worker):
    cell = worker.execute("len?")
    assert cell.ok
    payload = cell.done["payload"]
    assert payload and payload[0]["source"] == "page" and payload[0]["start"] == 0
    assert "Return the number of items" in plain(payload[0]["data"]["text/plain"])
    assert cell.result is None


def test_matplotlib_figures_become_png_displays(worker):
    cell = worker.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
    assert cell.ok, cell.error
    displays = cell.of_type("display")
    assert len(displays) == 1
    assert png_bytes(displays[0]["data"]["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert displays[0]["data"]["text/plain"].startswith("<Figure size")
    # the backend is chosen in-process: subprocesses must not inherit it through MPLBACKEND;
    # it answers to matplotlib_inline's name, which Debian's Python has
    cell = worker.execute("import os, matplotlib\n(matplotlib.get_backend(), os.environ.get('MPLBACKEND'))")
    assert cell.result == {"text/plain": "('module://matplotlib_inline.backend_inline', None)"}
    cell = worker.execute("plt.plot([3, 2, 1]);")  # no show(): shown at the end of the cell
    assert len(cell.of_type("display")) == 1 and cell.result is None
    assert worker.execute("len(plt.get_fignums())").result == {"text/plain": "0"}
    # a figure that is the cell's value is not shown a second time at the end of the cell
    cell = worker.execute("fig, ax = plt.subplots()\nax.plot([1, 2])\nfig")
    assert "image/png" in cell.result and not cell.of_type("display")


def test_figure_formats_are_chosen_without_loading_ipython(worker):
    """matplotlib_inline's set_matplotlib_formats and InlineBackend are the worker's (it stands
    in for the module): what they choose applies to figures the worker formats itself, and
    IPython stays unloaded. (Libraries set InlineBackend.instance().figure_formats.)"""
    cell = worker.execute("import sys, matplotlib.pyplot as plt, matplotlib_inline.config\n"
                          "from matplotlib_inline.backend_inline import (\n"
                          "    InlineBackend, set_matplotlib_formats)\n"
                          "set_matplotlib_formats('svg')\n"
                          "plt.plot([1, 2])\nplt.show()\n"
                          "InlineBackend.instance().figure_formats = {'retina'}\n"
                          "plt.plot([1, 2])\nplt.show()\n"
                          "print(matplotlib_inline.config.InlineBackend.instance()\n"
                          "      is InlineBackend.instance(), 'IPython' in sys.modules)")
    assert cell.ok, cell.error
    svg, retina = cell.of_type("display")
    assert set(svg["data"]) == {"text/plain", "image/svg+xml"} and "<svg" in svg["data"]["image/svg+xml"]
    png = png_bytes(retina["data"]["image/png"])
    size = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert retina["metadata"] == {"image/png": {"width": size[0] // 2, "height": size[1] // 2}}
    assert cell.stdout == "True False\n"


def test_without_matplotlib_inline_the_backend_keeps_its_own_name(worker):
    """An interpreter with matplotlib but no matplotlib_inline (here hidden from imports): the
    backend is belljar's by its own name, and figures are shown as ever."""
    cell = worker.execute("import sys\n"
                          "class Hidden:\n"
                          "    def find_spec(self, name, path=None, target=None):\n"
                          "        if name.split('.')[0] == 'matplotlib_inline':\n"
                          "            raise ModuleNotFoundError(name)\n"
                          "sys.meta_path.insert(0, Hidden())\n"
                          "import matplotlib.pyplot as plt\n"
                          "plt.plot([1, 2])\n"
                          "print(plt.get_backend(), [m for m in sys.modules if 'inline' in m])")
    assert cell.ok, cell.error
    assert cell.stdout == "module://belljar_worker.inline_backend ['belljar_worker.inline_backend']\n"
    [display] = cell.of_type("display")
    assert png_bytes(display["data"]["image/png"]).startswith(b"\x89PNG")


def test_matplotlib_inline_magic_routes_through_our_display(worker):
    cell = worker.execute("%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])")
    assert cell.ok, cell.error
    displays = cell.of_type("display")
    assert len(displays) == 1 and "image/png" in displays[0]["data"]


def test_top_level_await(worker):
    cell = worker.execute("import asyncio\nawait asyncio.sleep(0.01)\n"
                          "async def twice(x):\n    await asyncio.sleep(0)\n    return 2 * x\n"
                          "await twice(21)")
    assert cell.ok and cell.result == {"text/plain": "42"}
    worker.execute("loop_id = id(asyncio.get_running_loop()) if False else None\n"
                   "async def loop_now(): return id(asyncio.get_running_loop())\n"
                   "first = await loop_now()")
    cell = worker.execute("(await loop_now()) == first")
    assert cell.result == {"text/plain": "True"}  # one event loop across cells


def test_the_event_loop_runs_between_requests_and_what_it_sends_says_idle(worker):
    """A task created in a sync cell runs once the cell is over, on the loop get_event_loop()
    gave the cell, which top-level await uses too; a frame sent while no request is served
    carries `idle` and no id. asyncio.run() in a cell leaves no current loop: the session's is
    current again for the next cell."""
    cell = worker.execute("import asyncio\n"
                          "go = asyncio.Event()\n"
                          "async def later():\n"
                          "    await go.wait()\n"
                          "    display('between')\n"
                          "task = asyncio.get_event_loop().create_task(later())\n"
                          "asyncio.get_event_loop().call_soon(go.set)")
    assert cell.ok, cell.error
    assert worker.next_frame(timeout=10) == {"type": "display", "data": {"text/plain": "'between'"},
                                             "metadata": {}, "transient": {}, "idle": True}
    cell = worker.execute("async def loop_now(): return asyncio.get_running_loop()\n"
                          "(await loop_now()) is task.get_loop(), task.done()")
    assert cell.result == {"text/plain": "(True, True)"}
    assert worker.execute("asyncio.run(asyncio.sleep(0))").ok
    cell = worker.execute("asyncio.get_event_loop() is task.get_loop()")
    assert cell.result == {"text/plain": "True"}


def test_code_between_requests_is_interruptible_and_served_around(worker):
    """A task that never awaits holds the worker; SIGINT (the supervisor's interrupt for the
    request waiting behind it) ends that task and the request is served. SIGINT while the loop
    merely waits stops nothing: the other tasks run on."""
    worker.execute("import asyncio\n"
                   "ticks = 0\n"
                   "async def tick():\n"
                   "    global ticks\n"
                   "    while True:\n"
                   "        ticks += 1\n"
                   "        await asyncio.sleep(0.005)\n"
                   "ticker = asyncio.get_event_loop().create_task(tick())\n"
                   "async def hog():\n"
                   "    print('hogging', flush=True)\n"
                   "    while True:\n"
                   "        pass\n"
                   "hogger = asyncio.get_event_loop().create_task(hog())")
    worker.wait_for_output("hogging")
    worker.start_execute("type(hogger.exception()).__name__")
    worker.interrupt()
    assert worker.finish_execute(timeout=10).result == {"text/plain": "'KeyboardInterrupt'"}
    worker.interrupt()  # idle again: the ticker is not what an interrupt is for
    cell = worker.execute("before = ticks\nawait asyncio.sleep(0.05)\nticks > before")
    assert cell.result == {"text/plain": "True"}, cell.error


def test_limits_magic_exchange(worker):
    worker.start_execute("%%limits --timeout 2 --memory 256M --cpu 1.5 --output-limit 1M\n"
                         "print('limited')\n1 + 1", id="lim1")
    request = worker.next_frame()
    # The options' text, as written: the supervisor parses it with the command line's grammar.
    assert request == {"type": "limits", "id": "lim1", "timeout": "2", "memory": "256M",
                       "cpu": "1.5", "output_limit": "1M"}
    assert worker.events[-2:-1] == [] or all(k != "stdout" for k, _ in worker.events[worker._seen:])
    worker.send({"type": "limits_reply", "ok": True})
    cell = worker.finish_execute()
    assert cell.ok and cell.stdout == "limited\n" and cell.result == {"text/plain": "2"}

    worker.start_execute("%%limits --timeout 9999\nprint('never')", id="lim2")
    assert worker.next_frame()["type"] == "limits"
    worker.send({"type": "limits_reply", "ok": False, "error": "timeout above the policy's 60 s"})
    cell = worker.finish_execute()
    assert cell.error == {"type": "error", "id": "lim2", "ename": "LimitError",
                          "evalue": "timeout above the policy's 60 s",
                          "traceback": cell.error["traceback"]}
    assert "never" not in cell.stdout and cell.done["status"] == "error"

    cell = worker.execute("%%limits --memroy 1G\nprint('never')")
    assert cell.error["ename"] == "LimitError" and "--memroy" in cell.error["evalue"]
    assert not cell.of_type("limits")
    assert plain(cell.error["traceback"][-1]).startswith("LimitError: unknown option '--memroy'")


def test_limits_body_errors_report_cell_line_numbers(worker):
    worker.start_execute("%%limits --timeout 5\nx = 1\n1/0", execution_count=4)
    assert worker.next_frame()["type"] == "limits"
    worker.send({"type": "limits_reply", "ok": True})
    cell = worker.finish_execute()
    assert "Cell In[4], line 3" in plain("\n".join(cell.error["traceback"]))


def test_plain_cells_import_nothing_heavy():
    w = Worker(interpreter_flags=("-X", "importtime"))
    try:
        cell = w.execute("x = [i * i for i in range(10)]\nsum(x)", user_expressions={
            "heavy": "sorted(m for m in ('IPython', 'numpy', 'matplotlib', 'asyncio', 'pandas')"
                     " if m in __import__('sys').modules)"})
        assert cell.result == {"text/plain": "285"}
        assert cell.done["user_expressions"]["heavy"]["data"]["text/plain"] == "[]"
        imported = {line.split("|")[-1].strip() for line in
                    "".join(t for k, t in w.events if k == "stderr").splitlines()
                    if line.startswith("import time:")}
        assert "belljar_worker.main" in imported
        assert not imported & {"IPython", "numpy", "asyncio", "matplotlib", "json",
                               "belljar_worker.event_loop"}  # no loop runs while idle
    finally:
        w.close()


def test_eof_on_fd3_ends_the_worker_with_status_0():
    w = Worker()
    w.execute("x = 1")
    assert w.close() == 0


def test_without_ipython_magics_fail_clearly_and_the_rest_works():
    w = Worker(interpreter_flags=("-S",))  # no site-packages: no IPython, numpy, matplotlib
    try:
        assert w.execute("import IPython").error["ename"] == "ModuleNotFoundError"
        cell = w.execute("%time 1")
        assert cell.error["evalue"] == "magics need IPython, which is not installed in this interpreter"
        cell = w.execute("class H:\n    def _repr_html_(self): return '<p>'\ndisplay(H())\n{'a': 1}")
        assert cell.of_type("display")[0]["data"]["text/html"] == "<p>"
        assert cell.result == {"text/plain": "{'a': 1}"}
        w.start_execute("%%limits --timeout 3\n2 ** 10")
        assert w.next_frame()["type"] == "limits"
        w.send({"type": "limits_reply", "ok": True})
        assert w.finish_execute().result == {"text/plain": "1024"}
        reply = w.request({"type": "is_complete", "id": "k", "code": "%time x"}, "is_complete_reply")
        assert reply["status"] == "complete"
    finally:
        w.close()


def test_frames_count_what_the_streams_wrote(worker):
    # The cursor counts the bytes the worker's own streams wrote to fd 1/2 before the frame
    # (UTF-8 encoded), and not what a subprocess wrote to the same descriptors.
    assert worker.execute("pass").ok
    before = list(worker.last_written)
    cell = worker.execute("import os, sys\nprint('h\u00e9llo')\nprint('!', file=sys.stderr)\n"
                          "sys.stdout.flush()\nos.system('echo direct')")
    assert cell.ok and cell.stdout == "h\u00e9llo\ndirect\n" and cell.stderr == "!\n"
    assert worker.last_written == [before[0] + 7, before[1] + 2]
