"""Comms through a real belljar kernel, driven by jupyter_client (issue 14).

A frontend's comm_open, comm_msg and comm_close reach a target a cell registered inside the
sandbox; the worker's answers reach iopub parented to the frontend's message, with their binary
buffers as ZMQ frames (bytes on the client's side); comm_info_request is answered from the
worker's live comms. The worker is the attacker: its comm traffic is charged to the output limit
like any output, and a flood in either direction leaves the kernel serving. Last, the same
widget cell on ipykernel and on belljar opens the same comms (Debian's ipywidgets 6)."""
import contextlib
import json
import os
import pathlib
import queue
import shutil
import tempfile
import threading
import time

import psutil
import pytest
from jupyter_client.manager import KernelManager

from belljar_testing import (
    PYTHON,
    TIMEOUT,
    comm_round,
    execute,
    of_type,
    outputs_of,
    ready_client,
    running_kernel,
    send_comm,
    shell_read_fence,
    stderr_of,
    stdout_of,
)

MiB = 1 << 20
KiB = 1 << 10
NOTICE_SLACK = 4096  # one "[belljar] ... dropped" notice, and the message's own framing

# Targets are registered the way ipywidgets 6 does (get_ipython().kernel.comm_manager), which
# ipykernel 6.17 answers too: the same cells run on both (test_worker_comms covers the comm
# package's hooks).
ECHO_TARGET = """
from IPython import get_ipython
manager = get_ipython().kernel.comm_manager
def echo_target(comm, msg):
    print('opened with', msg['content']['data'], [b.tobytes() for b in msg['buffers']])
    def on_msg(m):
        first = m['buffers'][0].tobytes()
        comm.send({'echo': m['content']['data']}, buffers=[first[::-1], b'\\x00\\xff'])
    def on_close(m):
        print('closed with', m['content']['data'])
    comm.on_msg(on_msg)
    comm.on_close(on_close)
    comm.send({'hello': 1}, buffers=[b'\\x01\\x02\\x03'])
manager.register_target('echo', echo_target)
"""


@pytest.fixture(scope="module")
def kernel():
    with running_kernel(flags=["--timeout", "20"]) as (km, kc):
        yield km, kc


def comm_info(kc, target_name=None):
    msg_id = kc.comm_info(target_name)
    reply = kc.get_shell_msg(timeout=TIMEOUT)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=TIMEOUT)
    assert reply["msg_type"] == "comm_info_reply" and reply["content"]["status"] == "ok"
    return reply["content"]["comms"]


def raw(msg):
    """A message's buffers as bytes. They travel as ZMQ frames of their own (jupyter_client
    hands them over as memoryviews), never as base64 text inside the content."""
    assert all(isinstance(b, (bytes, memoryview)) for b in msg["buffers"]), msg["buffers"]
    return [bytes(b) for b in msg["buffers"]]


def comm_bytes(messages):
    """What comm messages carried to the client: their content and their binary buffers."""
    return sum(len(json.dumps(m["content"])) + sum(len(bytes(b)) for b in m.get("buffers", []))
               for m in messages if m["msg_type"].startswith("comm_"))


# -- the protocol ------------------------------------------------------------------------------

def test_a_comm_to_a_sandbox_target_carries_binary_buffers_both_ways(kernel):
    _, kc = kernel
    reply, _ = execute(kc, ECHO_TARGET)
    assert reply["content"]["status"] == "ok"
    payload = bytes(range(256)) * 64  # every byte value, 16 KiB
    open_id = send_comm(kc, "comm_open", {"comm_id": "echo-1", "target_name": "echo",
                                          "data": {"x": 1}}, buffers=[payload])
    outputs = outputs_of(kc, open_id)
    assert stdout_of(outputs) == "opened with {'x': 1} [%r]\n" % payload
    [hello] = of_type(outputs, "comm_msg")
    assert hello["parent_header"]["msg_id"] == open_id
    assert hello["content"] == {"comm_id": "echo-1", "data": {"hello": 1}}
    assert raw(hello) == [b"\x01\x02\x03"]

    msg_id = send_comm(kc, "comm_msg", {"comm_id": "echo-1", "data": {"n": 2}},
                       buffers=[payload, b"ignored"])
    [echo] = of_type(outputs_of(kc, msg_id), "comm_msg")
    assert echo["parent_header"]["msg_id"] == msg_id
    assert echo["content"] == {"comm_id": "echo-1", "data": {"echo": {"n": 2}}}
    assert raw(echo) == [payload[::-1], b"\x00\xff"]
    comm_round(kc, "comm_close", {"comm_id": "echo-1", "data": {}})


def test_comm_info_request_with_and_without_target_name(kernel):
    _, kc = kernel
    reply, _ = execute(kc, ECHO_TARGET + "from ipykernel.comm import Comm\n"
                                         "mine = Comm(target_name='kernel.side')\n",
                       user_expressions={"id": "mine.comm_id"})
    mine = json.loads(reply["content"]["user_expressions"]["id"]["data"]["text/plain"]
                      .replace("'", '"'))
    comm_round(kc, "comm_open", {"comm_id": "info-1", "target_name": "echo", "data": {}})
    everything = comm_info(kc)
    assert everything["info-1"] == {"target_name": "echo"}
    assert everything[mine] == {"target_name": "kernel.side"}
    assert comm_info(kc, "echo") == {"info-1": {"target_name": "echo"}}
    assert comm_info(kc, "kernel.side") == {mine: {"target_name": "kernel.side"}}
    assert comm_info(kc, "no.such.target") == {}
    execute(kc, "mine.close()")
    comm_round(kc, "comm_close", {"comm_id": "info-1", "data": {}})
    assert "info-1" not in comm_info(kc) and mine not in comm_info(kc)


def test_closing_a_comm_runs_its_on_close_and_unregisters_it(kernel):
    _, kc = kernel
    execute(kc, ECHO_TARGET)
    comm_round(kc, "comm_open", {"comm_id": "close-1", "target_name": "echo", "data": {}})
    outputs = comm_round(kc, "comm_close", {"comm_id": "close-1", "data": {"bye": True}})
    assert stdout_of(outputs) == "closed with {'bye': True}\n"
    assert "close-1" not in comm_info(kc)
    # A message to the closed comm reaches nothing, and the kernel still goes idle.
    assert not of_type(comm_round(kc, "comm_msg", {"comm_id": "close-1", "data": {}}), "comm_msg")


def test_a_comm_to_an_unknown_target_is_closed(kernel):
    _, kc = kernel
    open_id = send_comm(kc, "comm_open", {"comm_id": "lost-1", "target_name": "nobody.home",
                                          "data": {}})
    [closed] = of_type(outputs_of(kc, open_id), "comm_close")
    assert closed["content"]["comm_id"] == "lost-1"
    assert closed["parent_header"]["msg_id"] == open_id
    assert "lost-1" not in comm_info(kc)


def test_a_raising_handler_shows_its_traceback_and_the_kernel_serves_on(kernel):
    _, kc = kernel
    execute(kc, "from IPython import get_ipython\n"
                "def fragile(comm, msg):\n"
                "    def on_msg(m):\n"
                "        raise ValueError('handler broke')\n"
                "    comm.on_msg(on_msg)\n"
                "get_ipython().kernel.comm_manager.register_target('fragile', fragile)\n")
    comm_round(kc, "comm_open", {"comm_id": "fragile-1", "target_name": "fragile", "data": {}})
    outputs = comm_round(kc, "comm_msg", {"comm_id": "fragile-1", "data": {}})
    assert "ValueError" in stderr_of(outputs) and "handler broke" in stderr_of(outputs)
    reply, outputs = execute(kc, "print('next')")
    assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "next\n"


def test_a_handler_past_the_time_limit_is_interrupted_and_the_session_kept():
    """A slider moved to a workload too big is what the walkthrough's exercise shows: the
    handler is code like a cell and meets the kernel's --timeout the way a cell does."""
    with running_kernel(flags=["--timeout", "2"]) as (_, kc):
        execute(kc, "from IPython import get_ipython\n"
                    "kept = 'still here'\n"
                    "def spin(comm, msg):\n"
                    "    def on_msg(m):\n"
                    "        print('spinning')\n"
                    "        while True: pass\n"
                    "    comm.on_msg(on_msg)\n"
                    "get_ipython().kernel.comm_manager.register_target('spin', spin)\n")
        comm_round(kc, "comm_open", {"comm_id": "spin-1", "target_name": "spin", "data": {}})
        outputs = comm_round(kc, "comm_msg", {"comm_id": "spin-1", "data": {}})
        assert stdout_of(outputs) == "spinning\n"
        assert "[belljar] a comm handler passed the timeout limit and was interrupted" in stderr_of(outputs)
        reply, outputs = execute(kc, "print(kept)")
        assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "still here\n"
        assert "spin-1" in comm_info(kc)  # the comm itself is not closed by the interruption


def test_comm_messages_sent_while_a_cell_runs_are_handled_after_it_in_order(kernel):
    _, kc = kernel
    execute(kc, "from IPython import get_ipython\n"
                "def ordered(comm, msg):\n"
                "    comm.on_msg(lambda m: print('message', m['content']['data']['i']))\n"
                "get_ipython().kernel.comm_manager.register_target('ordered', ordered)\n")
    comm_round(kc, "comm_open", {"comm_id": "ordered-1", "target_name": "ordered", "data": {}})
    # The cell waits on input() until the kernel has read the comm messages sent meanwhile.
    cell = kc.execute("input(); print('cell done')", allow_stdin=True)
    assert kc.get_stdin_msg(timeout=TIMEOUT)["msg_type"] == "input_request"
    sent = [send_comm(kc, "comm_msg", {"comm_id": "ordered-1", "data": {"i": i}})
            for i in range(3)]
    shell_read_fence(kc)
    kc.input("")
    seen = []  # (parent, text) in iopub order
    waiting = {cell, *sent}
    deadline = time.monotonic() + TIMEOUT
    while waiting:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        parent = msg["parent_header"].get("msg_id")
        if msg["msg_type"] == "stream":
            seen.append((parent, msg["content"]["text"]))
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            waiting.discard(parent)
    assert seen == [(cell, "cell done\n")] + [(m, "message %d\n" % i) for i, m in enumerate(sent)]


# -- the worker is the attacker ------------------------------------------------------------------

def test_a_cells_comm_traffic_is_charged_to_its_output_limit():
    code = ("from comm import create_comm\n"
            "c = create_comm(target_name='hose')\n"
            "for i in range(50):\n"
            "    c.send({'i': i}, buffers=[b'h' * 102400])\n")
    with running_kernel(flags=["--output-limit", "1M"]) as (km, kc):
        reply, outputs = execute(kc, code, timeout=120)
        sent = comm_bytes(outputs)
        assert sent <= MiB + NOTICE_SLACK, f"{sent} bytes of comm traffic under --output-limit 1M"
        told = "output limit" in stderr_of(outputs) or of_type(outputs, "comm_close")
        assert told, [m["msg_type"] for m in outputs]
        reply, outputs = execute(kc, "print('still here')")
        assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "still here\n"


def peak_rss(process):
    """VmHWM of the supervisor: the most it ever held, so a spike that is freed still counts."""
    for line in pathlib.Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/%d/status" % process.pid)


class IopubDrain:
    """Reads iopub on a thread of its own while the test floods the shell channel, so the
    client's queue never fills (messages dropped there would make the bound look kept)."""

    def __init__(self, kc):
        self.kc, self.messages, self._stop = kc, [], threading.Event()
        self._arrived = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                msg = self.kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            with self._arrived:
                self.messages.append(msg)
                self._arrived.notify_all()

    def wait_idle(self, msg_id, timeout):
        def idle():
            return any(m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status"
                       and m["content"]["execution_state"] == "idle" for m in self.messages)
        with self._arrived:
            if not self._arrived.wait_for(idle, timeout):
                raise TimeoutError("no idle for %s" % msg_id)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)
        return self.messages


def test_a_flood_of_comm_messages_leaves_the_kernel_serving_and_the_caps_holding():
    # 5000 messages from the frontend, each answered from the sandbox with 100 KiB: 500 MiB if
    # nothing held it back.
    target = ("from comm import get_comm_manager\n"
              "answered = 0\n"
              "def hose(comm, msg):\n"
              "    def on_msg(m):\n"
              "        global answered\n"
              "        answered += 1\n"
              "        comm.send({'i': m['content']['data']['i']}, buffers=[b'f' * 102400])\n"
              "    comm.on_msg(on_msg)\n"
              "get_comm_manager().register_target('hose', hose)\n")
    with running_kernel(flags=["--output-limit", "1M", "--timeout", "60"]) as (km, kc):
        reply, _ = execute(kc, target)
        assert reply["content"]["status"] == "ok"
        comm_round(kc, "comm_open", {"comm_id": "hose-1", "target_name": "hose", "data": {}})
        supervisor = psutil.Process(km.provisioner.pid)
        before = peak_rss(supervisor)
        drain = IopubDrain(kc)
        try:
            for i in range(5000):
                send_comm(kc, "comm_msg", {"comm_id": "hose-1", "data": {"i": i}})
            probe = kc.execute("print('still serving')")
            answer = kc.get_shell_msg(timeout=300)
            while answer["parent_header"].get("msg_id") != probe:
                answer = kc.get_shell_msg(timeout=300)
            drain.wait_idle(probe, 60)
        finally:
            messages = drain.stop()
        assert answer["content"]["status"] == "ok"
        assert any(m["msg_type"] == "stream" and m["content"]["text"] == "still serving\n"
                   and m["parent_header"].get("msg_id") == probe for m in messages)
        flood = [m for m in messages if m["parent_header"].get("msg_id") != probe]
        sent = comm_bytes(flood)
        assert sent <= MiB + 128 * KiB, f"{sent / MiB:.1f} MiB of comm traffic under a 1M limit"
        told = any(m["msg_type"] == "comm_close" or (m["msg_type"] == "stream"
                   and "output limit" in m["content"]["text"]) for m in flood)
        assert told, "the frontend was not told that comm traffic was dropped"
        assert km.is_alive()
        grown = peak_rss(supervisor) - before
        assert grown < 80 * MiB, f"the supervisor grew by {grown / MiB:.0f} MiB in the flood"


# -- widgets ---------------------------------------------------------------------------------------

def test_a_slider_moved_by_the_frontend_reruns_interact_with_its_output_captured(kernel):
    _, kc = kernel
    msg_id = kc.execute("from ipywidgets import interact\n"
                        "def square(x):\n"
                        "    print('square of', x, 'is', x * x)\n"
                        "interact(square, x=(0, 10));")
    reply = kc.get_shell_msg(timeout=TIMEOUT)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=TIMEOUT)
    assert reply["content"]["status"] == "ok", reply["content"]
    outputs = outputs_of(kc, msg_id)
    models = {m["content"]["data"]["_model_name"]: m["content"]["comm_id"]
              for m in of_type(outputs, "comm_open")}
    assert of_type(outputs, "display_data")
    moved = send_comm(kc, "comm_msg", {"comm_id": models["IntSliderModel"], "data": {
        "method": "backbone", "sync_data": {"value": 7}}})
    outputs = outputs_of(kc, moved)
    assert stdout_of(outputs) == "square of 7 is 49\n"
    # The Output widget is pointed at the comm message while the function runs: the frontend
    # routes the output parented to it into the widget.
    states = [m["content"]["data"]["state"]["msg_id"] for m in of_type(outputs, "comm_msg")
              if m["content"]["comm_id"] == models["OutputModel"]
              and "msg_id" in m["content"]["data"].get("state", {})]
    assert states == [moved, ""]


@contextlib.contextmanager
def ipykernel_running():
    """Debian's ipykernel, started from a kernelspec in a private prefix."""
    prefix = pathlib.Path(tempfile.mkdtemp(prefix="belljar-comms-ipykernel-"))
    try:
        state = prefix / "state"
        state.mkdir()
        spec = prefix / "kernels" / "ipykernel-comms"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "ipykernel (comms parity)", "language": "python",
            "env": {"IPYTHONDIR": str(state / "ipython"), "MPLCONFIGDIR": str(state / "mpl"),
                    "PYDEVD_DISABLE_FILE_VALIDATION": "1"}}))
        km = KernelManager(kernel_name="ipykernel-comms")
        km.kernel_spec_manager.kernel_dirs.insert(0, str(spec.parent))
        km.start_kernel(cwd=str(prefix), env=dict(os.environ))
        with ready_client(km, now=True) as kc:
            yield km, kc
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def comm_trace(kc):
    """What a frontend sees of the widget cell and of its widget extension's version check:
    comm messages with their target or model, ids aside."""
    def trace(outputs):
        seen = []
        for m in outputs:
            kind, content = m["msg_type"], m["content"]
            if kind == "comm_open":
                seen.append((kind, content["target_name"], content["data"].get("_model_name")))
            elif kind in ("comm_msg", "comm_close"):
                seen.append((kind, json.dumps(content["data"], sort_keys=True)))
            elif kind == "display_data":
                seen.append((kind, sorted(set(content["data"]) - {"text/plain"})))
        return seen

    _, outputs = execute(kc, "import ipywidgets\nipywidgets.IntSlider(3)")
    cell = trace(outputs)
    version = trace(comm_round(kc, "comm_open", {"comm_id": "version-check",
                                                 "target_name": "jupyter.widget.version",
                                                 "data": {}}))
    return cell, version


VIEW = ("display_data", ["application/vnd.jupyter.widget-view+json"])


def test_the_same_widget_cell_opens_the_same_comms_on_ipykernel_and_belljar(kernel):
    with ipykernel_running() as (_, reference):
        expected = comm_trace(reference)
    cell, version = expected
    assert [t[:2] for t in cell[:3]] == [("comm_open", "jupyter.widget")] * 3, cell
    assert VIEW in cell
    assert version == [("comm_msg", json.dumps({"version": "~2.1.4"}))]
    # The same sequence under the default --active-output isolate: the supervisor checked the
    # models' state (widget_models.hpp), so the view of a model it checked is shown.
    _, kc = kernel
    assert comm_trace(kc) == expected
    # And where the policy lets all active output through.
    with running_kernel(flags=["--timeout", "20", "--active-output", "allow"]) as (_, allowed):
        assert comm_trace(allowed) == expected
