"""JupyterLab's debugger against belljar (issue 31), through real jupyter_client: the requests
JupyterLab's debugger service sends, in its order, on the control channel, with the debuggee
inside the sandbox. The same script runs on ipykernel 7.4 (the frontends venv: debugpy 1.8.22,
pandas 3.1) as the control and on belljar in the learner's venv (the same debugpy and pandas),
and the replies are compared field by field, after what is each kernel's own (sequence numbers, frame and variable ids, the cell
files' directory). Then what only belljar promises: the limits while a cell is stopped, the
control channel, interrupt, restart and shutdown at a breakpoint, bounded replies, and a Python
without debugpy."""
import contextlib
import json
import pathlib
import queue
import subprocess
import tempfile
import time

import psutil
import pytest

from belljar_testing import (
    FRONTENDS,
    PYTHON,
    SANDBOX_VENV_PYTHON,
    TIMEOUT,
    control_round,
    install_kernelspec,
    interrupt_and_wait,
    kernel_info,
    running_kernel,
    started_from,
    stdout_of,
)

CELL = "def f(x):\n    y = x * 2\n    return y\n\nz = f(21)\nprint(z)\n"
FRAME = "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\n"
JUPYTERLAB_INIT = {"clientID": "jupyterlab", "clientName": "JupyterLab", "adapterID": "python",
                   "pathFormat": "path", "linesStartAt1": True, "columnsStartAt1": True,
                   "supportsVariableType": True, "supportsVariablePaging": True,
                   "supportsRunInTerminalRequest": True, "locale": "en"}
DISCONNECT = {"restart": False, "terminateDebuggee": False}


class Debugging:
    """A client's debug session: requests on control, events gathered from IOPub."""

    def __init__(self, kc):
        self.kc = kc
        self.seq = 0
        self.events = []
        self.iopub = []

    def ask(self, command, arguments=None, timeout=TIMEOUT):
        self.seq += 1
        content = {"type": "request", "seq": self.seq, "command": command}
        if arguments is not None:
            content["arguments"] = arguments
        msg = self.kc.session.msg("debug_request", content)
        self.kc.control_channel.send(msg)
        deadline = time.monotonic() + timeout
        while True:
            reply = self.kc.get_control_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                assert reply["msg_type"] == "debug_reply", reply
                return reply["content"]

    def pump(self, timeout):
        msg = self.kc.get_iopub_msg(timeout=timeout)
        self.iopub.append(msg)
        if msg["msg_type"] == "debug_event":
            self.events.append(msg["content"])
        return msg

    def event(self, name, timeout=TIMEOUT):
        for seen in self.events:
            if seen["event"] == name and not seen.get("_taken"):
                seen["_taken"] = True
                return seen
        deadline = time.monotonic() + timeout
        while True:
            msg = self.pump(max(0.1, deadline - time.monotonic()))
            if msg["msg_type"] == "debug_event" and msg["content"]["event"] == name:
                msg["content"]["_taken"] = True
                return msg["content"]

    def reply_of(self, msg_id, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            reply = self.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"]

    def outputs_until_idle(self, msg_id, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        seen = [m for m in self.iopub if m["parent_header"].get("msg_id") == msg_id]
        if any(_idle(m) for m in seen):
            return seen
        while True:
            msg = self.pump(max(0.1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") == msg_id:
                seen.append(msg)
                if _idle(msg):
                    return seen

    def run(self, code, timeout=TIMEOUT):
        msg_id = self.kc.execute(code)
        reply = self.reply_of(msg_id, timeout)
        return reply, self.outputs_until_idle(msg_id, timeout)

    def start(self):
        assert self.ask("debugInfo")["success"]
        init = self.ask("initialize", JUPYTERLAB_INIT)
        assert init["success"], init
        attach = self.ask("attach", {})
        assert attach["success"], attach
        self.event("initialized")
        return init

    def stop_in_f(self, code=CELL, line=2):
        path = self.ask("dumpCell", {"code": code})["body"]["sourcePath"]
        answer = self.ask("setBreakpoints", {"source": {"path": path},
                                             "breakpoints": [{"line": line}],
                                             "sourceModified": False})
        assert answer["success"] and answer["body"]["breakpoints"][0]["verified"], answer
        msg_id = self.kc.execute(code)
        stopped = self.event("stopped")
        assert stopped["body"]["reason"] == "breakpoint", stopped
        return msg_id, path, stopped["body"]["threadId"]


def _idle(msg):
    return msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"


def _script(d):
    """The sequence JupyterLab sends, step by step; what each step answered, for comparison."""
    steps = {}
    info = d.ask("debugInfo")
    steps["debugInfo"] = info
    init = d.start()
    steps["initialize"] = init
    reply, _ = d.run(FRAME)
    assert reply["status"] == "ok", reply
    steps["inspectVariables"] = d.ask("inspectVariables")
    # Before any breakpoint: ipykernel keeps thread ids in stoppedThreads after a step and a
    # continue, and then fails this request for want of a frameId (a KeyError, no reply).
    steps["rich_not_stopped"] = d.ask("richInspectVariables", {"variableName": "df"})
    steps["modules"] = d.ask("modules", {})
    msg_id, path, thread = d.stop_in_f()
    steps["sourcePath"] = path
    steps["expected_path"] = "%s%s%s" % (info["body"]["tmpFilePrefix"],
                                         _murmur2(CELL), info["body"]["tmpFileSuffix"])
    steps["stoppedThreads"] = d.ask("debugInfo")["body"]["stoppedThreads"]
    stack = d.ask("stackTrace", {"threadId": thread})
    steps["stackTrace"] = stack
    top = stack["body"]["stackFrames"][0]["id"]
    scopes = d.ask("scopes", {"frameId": top})
    steps["scopes"] = scopes
    by_name = {s["name"]: s["variablesReference"] for s in scopes["body"]["scopes"]}
    steps["locals"] = d.ask("variables", {"variablesReference": by_name["Locals"]})
    steps["globals"] = d.ask("variables", {"variablesReference": by_name["Globals"]})
    steps["rich_stopped"] = d.ask("richInspectVariables", {"variableName": "df", "frameId": top})
    steps["evaluate"] = d.ask("evaluate", {"expression": "x + 1", "frameId": top,
                                           "context": "repl"})
    assert d.ask("next", {"threadId": thread})["success"]
    d.event("continued")
    assert d.event("stopped")["body"]["reason"] == "step"
    stack = d.ask("stackTrace", {"threadId": thread})
    steps["line_after_next"] = stack["body"]["stackFrames"][0]["line"]
    top = stack["body"]["stackFrames"][0]["id"]
    scopes = d.ask("scopes", {"frameId": top})["body"]["scopes"]
    steps["locals_after_next"] = d.ask("variables", {
        "variablesReference": scopes[0]["variablesReference"]})
    steps["copyToGlobals"] = d.ask("copyToGlobals", {"srcVariableName": "y",
                                                     "dstVariableName": "y_copy",
                                                     "srcFrameId": top})
    steps["continue"] = d.ask("continue", {"threadId": thread})
    steps["execute_reply"] = d.reply_of(msg_id)
    steps["stdout"] = stdout_of(d.outputs_until_idle(msg_id))
    steps["inspect_after"] = d.ask("inspectVariables")
    steps["source"] = d.ask("source", {"source": {"path": path}, "sourceReference": 0})
    steps["clear"] = d.ask("setBreakpoints", {"source": {"path": path}, "breakpoints": [],
                                              "sourceModified": False})
    steps["disconnect"] = d.ask("disconnect", DISCONNECT)
    steps["debugInfo_after"] = d.ask("debugInfo")
    # A second session on the same kernel: JupyterLab's bug button off and on again.
    d.start()
    steps["disconnect_again"] = d.ask("disconnect", DISCONNECT)
    return steps


def _murmur2(text):
    data, m, h = text.encode(), 0x5BD1E995, 0xC70F6907 ^ len(text.encode())
    mask = 0xFFFFFFFF
    for i in range(0, len(data) - len(data) % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little") * m & mask
        k = (k ^ k >> 24) * m & mask
        h = (h * m & mask) ^ k
    tail = data[len(data) - len(data) % 4:]
    for i in reversed(range(len(tail))):
        h ^= tail[i] << (8 * i)
    if tail:
        h = h * m & mask
    h = (h ^ h >> 13) * m & mask
    return h ^ h >> 15


def _names(variables_reply):
    return {v["name"]: (v["value"], v["type"]) for v in variables_reply["body"]["variables"]}


@contextlib.contextmanager
def _ipykernel():
    with tempfile.TemporaryDirectory(prefix="belljar-debug-ipykernel-") as prefix:
        spec = pathlib.Path(prefix) / "kernels" / "ipykernel-control"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [str(FRONTENDS / "bin" / "python"), "-Xfrozen_modules=off", "-m",
                     "ipykernel_launcher",
                     "-f", "{connection_file}"],
            "display_name": "ipykernel", "language": "python",
            "metadata": {"debugger": True}}))
        with started_from(spec.parent, "ipykernel-control") as running:
            yield running


@pytest.fixture(scope="module")
def both_scripts():
    with _ipykernel() as (_, kc):
        theirs = _script(Debugging(kc))
    with running_kernel(flags=["--timeout", "120", "--python", SANDBOX_VENV_PYTHON]) as (_, kc):
        assert kernel_info(kc)["debugger"] is True
        ours = _script(Debugging(kc))
    return ours, theirs


def test_the_sequence_jupyterlab_sends_answers_as_ipykernel_does(both_scripts):
    ours, theirs = both_scripts
    for steps in (ours, theirs):
        assert steps["sourcePath"] == steps["expected_path"]
        assert steps["stoppedThreads"]
        assert _names(steps["locals"]) == {"x": ("21", "int")}
        assert "df" in _names(steps["globals"])
        assert steps["evaluate"]["body"]["result"] == "22"
        assert steps["line_after_next"] == 3
        assert _names(steps["locals_after_next"])["y"] == ("42", "int")
        assert steps["execute_reply"]["status"] == "ok" and steps["stdout"] == "42\n"
        assert {"z", "y_copy", "df"} <= set(_names(steps["inspect_after"]))
        assert steps["source"]["body"]["content"] == CELL
        assert steps["debugInfo_after"]["body"]["isStarted"] is False
        assert "text/html" in steps["rich_stopped"]["body"]["data"]
        assert "text/html" in steps["rich_not_stopped"]["body"]["data"]
    # debugInfo: the same fields, hash and suffix; each kernel its own directory.
    a, b = ours["debugInfo"]["body"], theirs["debugInfo"]["body"]
    assert set(a) == set(b)
    for key in ("isStarted", "hashMethod", "hashSeed", "tmpFileSuffix", "breakpoints",
                "stoppedThreads", "richRendering", "exceptionPaths", "copyToGlobals"):
        assert a[key] == b[key], key
    # initialize: the capabilities offered are ipykernel's (its debugpy adapter's), but for
    # those that would reach past the session (ending the process, goto, step-in targets).
    withheld = {"supportsTerminateRequest", "supportsTerminateDebuggee",
                "supportsDebuggerProperties", "supportsGotoTargetsRequest",
                "supportsStepInTargetsRequest"}
    offered = {k for k, v in ours["initialize"]["body"].items() if v is True}
    theirs_offered = {k for k, v in theirs["initialize"]["body"].items() if v is True}
    assert offered == theirs_offered - withheld, (offered ^ (theirs_offered - withheld))
    # The stack: the cell's frames alone, on both, the same names and lines.
    for steps in (ours, theirs):
        frames = steps["stackTrace"]["body"]["stackFrames"]
        assert [(f["name"], f["line"]) for f in frames][:2] == [("f", 2), ("<module>", 5)]
    ours_frames = [(f["name"], f["line"]) for f in ours["stackTrace"]["body"]["stackFrames"]]
    assert ours_frames == [("f", 2), ("<module>", 5)]
    # Scopes, variables and their shapes.
    assert [s["name"] for s in ours["scopes"]["body"]["scopes"]] == \
        [s["name"] for s in theirs["scopes"]["body"]["scopes"]]
    for step in ("locals", "locals_after_next"):
        assert ours[step]["body"] == theirs[step]["body"], step
    assert _names(ours["inspectVariables"])["df"] == _names(theirs["inspectVariables"])["df"]
    assert ours["evaluate"]["body"] == theirs["evaluate"]["body"]
    # Rich inspection: the same formats, the same table.
    for step in ("rich_stopped", "rich_not_stopped"):
        assert set(ours[step]["body"]["data"]) == set(theirs[step]["body"]["data"]), step
        assert ours[step]["body"]["data"]["text/plain"] == \
            theirs[step]["body"]["data"]["text/plain"], step
    # Every reply names the request it answers (ipykernel's modules reply has no envelope,
    # and its richInspectVariables says sequence_seq: belljar answers in DAP's shape).
    for name, answer in ours.items():
        if isinstance(answer, dict) and "command" in answer:
            assert answer["type"] == "response" and answer["success"] is True, (name, answer)
            assert isinstance(answer["request_seq"], int), (name, answer)
    assert ours["modules"]["body"]["totalModules"] > 0


@pytest.fixture
def debugged():
    with running_kernel(flags=["--timeout", "3", "--debug-pause", "1h"]) as (km, kc):
        d = Debugging(kc)
        d.start()
        yield km, kc, d


def test_at_a_breakpoint_the_control_channel_and_the_clock_wait_for_the_user(debugged):
    km, kc, d = debugged
    msg_id, _, thread = d.stop_in_f()
    # The control channel answers (shell requests wait behind the cell, as on ipykernel).
    assert control_round(kc, "kernel_info_request")["content"]["debugger"] is True
    assert d.ask("debugInfo")["body"]["stoppedThreads"] == [thread]
    # Paused well past the cell's 3 s --timeout: no TimeoutError, the cell waits.
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        with contextlib.suppress(queue.Empty):
            msg = d.pump(deadline - time.monotonic())
            assert not (msg["parent_header"].get("msg_id") == msg_id
                        and msg["msg_type"] == "error"), msg["content"]
    assert d.ask("continue", {"threadId": thread})["success"]
    assert d.reply_of(msg_id)["status"] == "ok"
    assert stdout_of(d.outputs_until_idle(msg_id)) == "42\n"
    # Running time still counts: a loop after the breakpoint is ended by the 3 s limit.
    code = "x = 1\nwhile True:\n    pass\n"
    msg_id, _, thread = d.stop_in_f(code, line=1)
    d.ask("continue", {"threadId": thread})
    reply = d.reply_of(msg_id, timeout=30)
    assert reply["status"] == "error" and reply["ename"] == "TimeoutError", reply


def test_an_interrupt_at_a_breakpoint_ends_the_cell_and_the_session_goes_on(debugged):
    km, kc, d = debugged
    msg_id, _, _ = d.stop_in_f()
    interrupt_and_wait(kc)
    reply = d.reply_of(msg_id)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    d.event("continued")
    assert not d.ask("debugInfo")["body"]["stoppedThreads"]
    msg_id, _, thread = d.stop_in_f()  # the next run stops at its breakpoint again
    assert d.ask("continue", {"threadId": thread})["success"]
    assert d.reply_of(msg_id)["status"] == "ok"


def test_a_restart_at_a_breakpoint_gives_a_fresh_session(debugged):
    km, kc, d = debugged
    d.stop_in_f()
    km.restart_kernel(now=True)
    kc.wait_for_ready(timeout=TIMEOUT)
    assert d.ask("debugInfo")["body"]["isStarted"] is False
    reply, outputs = d.run("print(6 * 7)")
    assert reply["status"] == "ok" and stdout_of(outputs) == "42\n"


def test_a_shutdown_at_a_breakpoint_ends_the_kernel():
    with running_kernel() as (km, kc):
        d = Debugging(kc)
        d.start()
        d.stop_in_f()
        kernel = psutil.Process(km.provisioner.process.pid)
        kc.shutdown()  # shutdown_request on control, as JupyterLab's "Shut Down Kernel"
        kernel.wait(timeout=TIMEOUT)  # psutil.TimeoutExpired: the kernel outlived the request


def test_the_pause_allowance_ends_a_cell_stopped_for_too_long():
    with running_kernel(flags=["--timeout", "2", "--debug-pause", "2s"]) as (km, kc):
        d = Debugging(kc)
        d.start()
        msg_id, _, _ = d.stop_in_f()
        reply = d.reply_of(msg_id, timeout=60)
        assert reply["status"] == "error" and reply["ename"] == "TimeoutError", reply
        reply, outputs = d.run("print('next')")
        assert reply["status"] == "ok" and stdout_of(outputs) == "next\n"


def test_a_limits_cell_stops_at_its_breakpoint():
    with running_kernel(flags=["--timeout", "60"]) as (km, kc):
        d = Debugging(kc)
        d.start()
        code = "%%limits --timeout 2\n" + CELL
        msg_id, path, thread = d.stop_in_f(code, line=3)  # the magic's line counts
        frames = d.ask("stackTrace", {"threadId": thread})["body"]["stackFrames"]
        assert (frames[0]["name"], frames[0]["line"], frames[0]["source"]["path"]) == \
            ("f", 3, path)
        assert d.ask("continue", {"threadId": thread})["success"]
        assert d.reply_of(msg_id)["status"] == "ok"


def test_a_reply_over_the_output_limit_is_refused_whole():
    with running_kernel(flags=["--output-limit", "64K"]) as (km, kc):
        d = Debugging(kc)
        d.start()
        reply, _ = d.run("big = 'x' * 400_000")
        assert reply["status"] == "ok"
        answer = d.ask("richInspectVariables", {"variableName": "big"})
        assert answer["success"] is False and "--output-limit" in answer["message"], answer
        assert d.ask("debugInfo")["success"]


def test_a_python_without_debugpy_says_so_and_refuses_every_request(tmp_path):
    venv = tmp_path / "no-debugpy"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    with tempfile.TemporaryDirectory(prefix="belljar-spec-") as prefix:
        spec = install_kernelspec(prefix, "belljar-no-debugpy",
                                  flags=["--python", str(venv / "bin" / "python")])
        assert json.loads((spec / "kernel.json").read_text())["metadata"]["debugger"] is False
    with running_kernel(flags=["--python", str(venv / "bin" / "python")]) as (km, kc):
        assert kernel_info(kc)["debugger"] is False
        d = Debugging(kc)
        for command in ("debugInfo", "initialize", "dumpCell"):
            answer = d.ask(command, {})
            assert answer["success"] is False and "debugpy" in answer["message"], answer


def test_the_kernelspec_offers_the_debugger_when_the_python_has_debugpy():
    for python in (PYTHON, SANDBOX_VENV_PYTHON):
        with tempfile.TemporaryDirectory(prefix="belljar-spec-") as prefix:
            spec = install_kernelspec(prefix, "belljar-debug", flags=["--python", python])
            assert json.loads((spec / "kernel.json").read_text())["metadata"]["debugger"] is True


def test_requests_sent_together_are_answered_one_at_a_time():
    """Each debug_request's busy, reply and idle come before the next one's busy, as ipykernel
    serves its control channel (clients pair busy and idle with their request)."""
    with running_kernel() as (km, kc):
        d = Debugging(kc)
        d.start()
        sent = []
        for _ in range(4):
            d.seq += 1
            msg = kc.session.msg("debug_request", {"type": "request", "seq": d.seq,
                                                   "command": "inspectVariables"})
            kc.control_channel.send(msg)
            sent.append(msg["header"]["msg_id"])
        replies = [kc.get_control_msg(timeout=TIMEOUT) for _ in sent]
        assert [r["parent_header"]["msg_id"] for r in replies] == sent
        states = []
        while len(states) < 2 * len(sent):
            msg = d.pump(TIMEOUT)
            if msg["msg_type"] == "status" and msg["parent_header"].get("msg_id") in sent:
                states.append((msg["content"]["execution_state"], msg["parent_header"]["msg_id"]))
        assert states == [(state, msg_id) for msg_id in sent for state in ("busy", "idle")]
