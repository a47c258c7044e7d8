"""The worker's half of JupyterLab's debugger (worker/belljar_worker/debugger/), driven on
fd 4 the way the supervisor drives it, with the worker started as the supervisor starts it
(test_worker_protocol.Worker). The whole path through the kernel and jupyter_client is in
test_debugger.py; here, what only the worker decides."""
import json
import os
import select
import subprocess
import time

import pytest
from test_worker_protocol import PYTHON, WORKER_DIR, Worker

FRONTENDS = os.environ.get("BELLJAR_FRONTENDS")
VENV_PYTHON = os.environ.get("BELLJAR_SANDBOX_VENV_PYTHON")
CELL = "def f(x):\n    y = x * 2\n    return y\n\nz = f(21)\nprint(z)\n"
JUPYTERLAB_INIT = {"clientID": "jupyterlab", "clientName": "JupyterLab", "adapterID": "python",
                   "pathFormat": "path", "linesStartAt1": True, "columnsStartAt1": True,
                   "supportsVariableType": True, "supportsVariablePaging": True,
                   "supportsRunInTerminalRequest": True, "locale": "en"}


class DebugWorker(Worker):
    def __init__(self, python=PYTHON, address_space=None):
        super().__init__(python=python, debug_channel=True, address_space=address_space)
        self.seq = 0
        self.debug_frames = []
        self.debug_written = []
        self._events_taken = 0  # debug_frames before this index were looked through by event()

    def debug_send(self, command, arguments=None):
        self.seq += 1
        content = {"seq": self.seq, "type": "request", "command": command}
        if arguments is not None:
            content["arguments"] = arguments
        data = json.dumps({"type": "debug_request", "id": self.seq, "content": content}).encode()
        self.debug.sendall(len(data).to_bytes(4, "big") + data)
        return self.seq

    def debug_frame(self, timeout=30):
        ready, _, _ = select.select([self.debug], [], [], timeout)
        if not ready:
            raise TimeoutError("no frame on fd 4 within %ss; last: %r"
                               % (timeout, self.debug_frames[-3:]))
        size = int.from_bytes(self._recv(4), "big")
        frame = json.loads(self._recv(size))
        written = frame.pop("written")
        assert isinstance(written, list), frame
        self.debug_frames.append(frame)
        self.debug_written.append(written)  # the pipes' byte counts when it was sent
        return frame

    def _recv(self, n):
        data = b""
        while len(data) < n:
            chunk = self.debug.recv(n - len(data))
            assert chunk, "the worker closed fd 4"
            data += chunk
        return data

    def ask(self, command, arguments=None, timeout=60):
        seq = self.debug_send(command, arguments)
        while True:
            frame = self.debug_frame(timeout)
            if frame["type"] == "debug_reply" and frame["id"] == seq:
                content = frame["content"]
                assert content["request_seq"] == seq and content["command"] == command, content
                return content

    def close(self):
        self.proc.kill()  # a cell may still be stopped at a breakpoint, never reading fd 3
        return super().close()

    def event(self, name, timeout=30):
        """The next event `name`: pydevd may send it before its reply to the request that
        caused it (`stopped` before `next`'s reply), so frames already read count too."""
        while True:
            while self._events_taken < len(self.debug_frames):
                frame = self.debug_frames[self._events_taken]
                self._events_taken += 1
                if frame["type"] == "debug_event" and frame["content"]["event"] == name:
                    return frame["content"]
            self.debug_frame(timeout)


@pytest.fixture(params=["debian", "venv"])
def debug_worker(request):
    python = PYTHON if request.param == "debian" else VENV_PYTHON
    if python is None:
        pytest.skip("BELLJAR_SANDBOX_VENV_PYTHON is not set (the sandbox-python venv)")
    w = DebugWorker(python)
    yield w
    w.close()


def _start(w):
    assert w.ask("initialize", JUPYTERLAB_INIT)["success"]
    assert w.ask("attach", {})["success"]


def _stop_at(w, code=CELL, line=2):
    """Run `code` with a breakpoint at `line`, as JupyterLab sets one; (its path, the thread)."""
    path = w.ask("dumpCell", {"code": code})["body"]["sourcePath"]
    answer = w.ask("setBreakpoints", {"source": {"path": path}, "breakpoints": [{"line": line}],
                                      "sourceModified": False})
    assert answer["body"]["breakpoints"][0]["verified"], answer
    w.start_execute(code)
    stopped = w.event("stopped")
    assert stopped["body"]["reason"] == "breakpoint"
    return path, stopped["body"]["threadId"]


def test_the_hash_is_the_one_jupyterlab_and_ipykernel_compute():
    if not FRONTENDS:
        pytest.skip("BELLJAR_FRONTENDS is not set (ipykernel's compiler is the reference)")
    samples = ["", "a", "ab", "abc", "abcd", "abcde", CELL, "é = 'ünïcødé' * 3\n", "🐍" * 7]
    script = ("import json, sys\nfrom ipykernel.compiler import murmur2_x86\n"
              "print(json.dumps([murmur2_x86(s, 0xC70F6907) for s in json.load(sys.stdin)]))")
    theirs = json.loads(subprocess.run([FRONTENDS + "/bin/python", "-c", script],
                                       input=json.dumps(samples), capture_output=True,
                                       text=True, check=True).stdout)
    ours = subprocess.run([PYTHON, "-c", "import json, sys; sys.path.insert(0, %r)\n"
                           "from belljar_worker.debugger.cell_files import murmur2\n"
                           "print(json.dumps([murmur2(s.encode()) for s in "
                           "json.load(sys.stdin)]))" % str(WORKER_DIR)],
                          input=json.dumps(samples), capture_output=True, text=True, check=True)
    assert json.loads(ours.stdout) == theirs


def test_without_fd_4_the_worker_says_it_cannot_debug():
    w = Worker()
    try:
        assert w.hello["debugger"] is False
    finally:
        w.close()


def test_nothing_of_debugpy_is_loaded_until_the_debugger_is_turned_on(debug_worker):
    w = debug_worker
    assert w.hello["debugger"] is True
    for _ in range(3):
        info = w.ask("debugInfo")
        assert info["success"] and info["body"]["isStarted"] is False
    assert w.ask("dumpCell", {"code": CELL})["success"]
    cell = w.execute("import sys\nprint(sorted(m for m in sys.modules "
                     "if m.split('.')[0] in ('debugpy', 'pydevd', '_pydevd_bundle')))")
    assert cell.stdout == "[]\n", cell.events
    _start(w)
    cell = w.execute("print('debugpy' in sys.modules)")
    assert cell.stdout == "True\n"


def test_a_breakpoint_stops_the_cell_where_jupyterlab_set_it(debug_worker):
    w = debug_worker
    info = w.ask("debugInfo")["body"]
    _start(w)
    path, thread = _stop_at(w)
    assert path.startswith(info["tmpFilePrefix"]) and path.endswith(".py")
    assert {"type": "debug_state", "paused": True} in w.debug_frames
    assert w.ask("debugInfo")["body"]["stoppedThreads"] == [thread]
    frames = w.ask("stackTrace", {"threadId": thread})["body"]["stackFrames"]
    # Only the cell's frames: none of belljar's worker, none of pydevd.
    assert [(f["name"], f["line"], f["source"]["path"]) for f in frames] == [
        ("f", 2, path), ("<module>", 5, path)]
    scopes = w.ask("scopes", {"frameId": frames[0]["id"]})["body"]["scopes"]
    local = w.ask("variables", {"variablesReference": scopes[0]["variablesReference"]})
    assert [(v["name"], v["value"]) for v in local["body"]["variables"]] == [("x", "21")]
    answer = w.ask("evaluate", {"expression": "x + 1", "frameId": frames[0]["id"],
                                "context": "repl"})
    assert answer["body"]["result"] == "22"
    rich = w.ask("richInspectVariables", {"variableName": "x", "frameId": frames[0]["id"]})
    assert rich["body"] == {"data": {"text/plain": "21"}, "metadata": {}}
    assert w.ask("next", {"threadId": thread})["success"]
    assert w.event("stopped")["body"]["reason"] == "step"
    frames = w.ask("stackTrace", {"threadId": thread})["body"]["stackFrames"]
    assert frames[0]["line"] == 3
    assert w.ask("continue", {"threadId": thread})["success"]
    cell = w.finish_execute()
    assert cell.done["status"] == "ok" and cell.stdout == "42\n"
    assert {"type": "debug_state", "paused": False} in w.debug_frames
    names = [v["name"] for v in w.ask("inspectVariables")["body"]["variables"]]
    assert "z" in names and "f" not in names and "In" not in names  # f: a function variable
    assert w.ask("disconnect", {"restart": False, "terminateDebuggee": False})["success"]
    assert w.ask("debugInfo")["body"]["isStarted"] is False
    cell = w.execute(CELL)  # no session: the breakpoint is gone and the cell runs through
    assert cell.stdout == "42\n"


def test_an_interrupt_at_a_breakpoint_ends_the_cell_and_the_next_one_stops_again(debug_worker):
    w = debug_worker
    _start(w)
    for _ in range(2):
        _stop_at(w)
        w.interrupt()
        cell = w.finish_execute()
        assert cell.done["status"] == "error" and cell.error["ename"] == "KeyboardInterrupt"
        # The user's frames and nothing of the debugger's wait under them.
        text = "\n".join(cell.error["traceback"])
        assert "pydevd" not in text and text.count("in \x1b[0;36mf\x1b[0m") == 1, text
        w.event("continued")
        assert w.execute("print(1 + 1)").stdout == "2\n"


def test_a_second_debug_session_on_the_same_worker(debug_worker):
    w = debug_worker
    for _ in range(2):
        _start(w)
        _, thread = _stop_at(w)
        assert w.ask("continue", {"threadId": thread})["success"]
        assert w.finish_execute().stdout == "42\n"
        assert w.ask("disconnect", {"restart": False, "terminateDebuggee": False})["success"]


def test_requests_it_does_not_serve_are_refused_without_reaching_pydevd(debug_worker):
    w = debug_worker
    assert w.ask("stackTrace", {"threadId": 1})["message"] == "the debugger is not started"
    _start(w)
    for command in ("terminate", "launch", "restart", "pydevdAuthorize", "gotoTargets"):
        answer = w.ask(command, {})
        assert answer["success"] is False and command in answer["message"], answer
    cell = w.execute("print('still here')")
    assert cell.stdout == "still here\n"  # pydevd would have printed "Unhandled" into a cell


def test_print_before_a_breakpoint_comes_before_the_stopped_event(debug_worker):
    w = debug_worker
    _start(w)
    _stop_at(w, "print('before')\nx = 1\n")
    stopped = next(i for i, f in enumerate(w.debug_frames)
                   if f.get("content", {}).get("event") == "stopped")
    # The frame's cursor counts 'before\n': the supervisor shows it ahead of the event.
    assert w.debug_written[stopped][0] >= len("before\n")
    w.ask("continue", {"threadId": 1})
    cell = w.finish_execute()
    assert cell.stdout == "before\n"


def test_the_debug_thread_answers_while_a_cell_runs(debug_worker):
    w = debug_worker
    _start(w)
    w.start_execute("import time\nprint('running', flush=True)\ntime.sleep(60)")
    w.wait_for_output("running")
    started = time.monotonic()
    assert w.ask("inspectVariables")["success"]
    assert w.ask("debugInfo")["body"]["isStarted"] is True
    assert time.monotonic() - started < 30
    w.interrupt()
    assert w.finish_execute().error["ename"] == "KeyboardInterrupt"


def test_a_cell_in_ipython_syntax_keeps_its_leading_blank_lines_for_the_debugger(debug_worker):
    """IPython's input cleanup drops a cell's leading blank lines, which would move every line
    one up from where JupyterLab's gutter put the breakpoint."""
    w = debug_worker
    _start(w)
    path, thread = _stop_at(w, "\n\nx = 1\n%time y = 2\nz = x + y\n", line=5)
    frames = w.ask("stackTrace", {"threadId": thread})["body"]["stackFrames"]
    assert (frames[0]["line"], frames[0]["source"]["path"]) == (5, path)
    w.ask("continue", {"threadId": thread})
    assert w.finish_execute().done["status"] == "ok"


def test_ending_the_debug_session_at_a_breakpoint_lets_the_cell_run_on(debug_worker):
    """JupyterLab's Terminate (and turning the debugger off) sends disconnect: the session ends,
    never the process (terminateDebuggee is not honoured), and the stopped cell runs to its end."""
    w = debug_worker
    _start(w)
    _stop_at(w)
    answer = w.ask("disconnect", {"restart": False, "terminateDebuggee": True})
    assert answer["success"], answer
    cell = w.finish_execute()
    assert cell.done["status"] == "ok" and cell.stdout == "42\n"
    assert {"type": "debug_state", "paused": False} in w.debug_frames  # the clock runs again
    assert w.proc.poll() is None


def test_the_debugger_fits_under_an_address_space_cap():
    """Without a memory cgroup (an unprivileged user), --memory is RLIMIT_AS, which counts every
    thread's stack and malloc arena whole: pydevd's five threads took 465 MiB of address space
    (64 MiB arenas, 8 MiB stacks) and a 512 MiB session could not start the debugger. They share
    the session's arenas and take 2 MiB stacks: turned on, the debugger leaves the cell its room."""
    w = DebugWorker(address_space=384 << 20)
    try:
        _start(w)
        _, thread = _stop_at(w)
        w.ask("continue", {"threadId": thread})
        assert w.finish_execute().stdout == "42\n"
        cell = w.execute("hog = bytearray(160 << 20); del hog; print('room')")
        assert cell.done["status"] == "ok" and cell.stdout == "room\n", cell.events[-3:]
    finally:
        w.close()


def test_a_cell_that_closes_fd_4_ends_the_debugger_and_output_still_flows(debug_worker):
    """The thread that serves fd 4 is the one that flushes the streams every 50 ms: a cell that
    closes the channel under it must not stop the flushing. Each round writes without a newline
    and waits (10 s at most) until that thread has flushed it."""
    w = debug_worker
    cell = w.execute(
        "import os, sys, time\n"
        "from belljar_worker import current\n"
        "streams = current.session.streams\n"
        "os.close(4)\n"
        "def flushed_by_the_thread():\n"
        "    before = streams.written[0]\n"
        "    sys.stdout.write('.')\n"
        "    deadline = time.monotonic() + 10\n"
        "    while streams.written[0] == before and time.monotonic() < deadline:\n"
        "        time.sleep(0.01)\n"
        "    return streams.written[0] > before\n"
        "print(all(flushed_by_the_thread() for _ in range(5)))\n")
    assert cell.stdout == ".....True\n", cell.events
    assert "Exception" not in cell.stderr, cell.stderr
