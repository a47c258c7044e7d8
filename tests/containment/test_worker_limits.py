"""Limits the worker cannot argue with, and budgets without exemption (issue 39, findings 4 and 5).

The cell is the attacker and speaks for the worker on its debug channel (fd 4), as the honest
worker's debug thread does, while a real jupyter_client debug session is started (JupyterLab's
sequence: debugInfo, initialize, attach). Each attack is measured from outside: when the cell's
reply comes and what it says, the bytes delivered to the client on IOPub."""
import json
import time

from belljar_testing import TIMEOUT, execute, running_kernel, stdout_of, wait_for_stream

JUPYTERLAB_INIT = {"clientID": "jupyterlab", "clientName": "JupyterLab", "adapterID": "python",
                   "pathFormat": "path", "linesStartAt1": True, "columnsStartAt1": True,
                   "supportsVariableType": True, "supportsVariablePaging": True,
                   "supportsRunInTerminalRequest": True, "locale": "en"}

# The cell's way to forge a debug frame: fd 4's framing (a 4-byte big-endian length, then JSON).
FORGE = (
    "import json as _json, os as _os\n"
    "def forge(frame):\n"
    "    data = _json.dumps(frame).encode()\n"
    "    _os.write(4, len(data).to_bytes(4, 'big') + data)\n"
)
PAUSE = FORGE + "forge({'type': 'debug_state', 'paused': True})\n"


def ask(kc, command, arguments=None):
    """A debug_request on control, as JupyterLab sends it; its debug_reply's content."""
    content = {"type": "request", "seq": 1, "command": command}
    if arguments is not None:
        content["arguments"] = arguments
    msg = kc.session.msg("debug_request", content)
    kc.control_channel.send(msg)
    deadline = time.monotonic() + TIMEOUT
    while True:
        reply = kc.get_control_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return reply["content"]


def start_debugging(kc):
    assert ask(kc, "debugInfo")["success"]
    assert ask(kc, "initialize", JUPYTERLAB_INIT)["success"]
    assert ask(kc, "attach", {})["success"]
    assert ask(kc, "debugInfo")["body"]["isStarted"] is True


def timed(kc, code, timeout=TIMEOUT):
    started = time.monotonic()
    reply, outputs = execute(kc, code, timeout=timeout)
    return reply, outputs, time.monotonic() - started


# --- finding 4: the CPU cap whatever --timeout is; a claimed pause stops the wall clock only ---

def test_a_forged_pause_stops_the_wall_clock_of_a_sleeping_cell():
    # The control: the forged frame reaches the supervisor and is believed while the session
    # uses no CPU (a paused thread uses none), so a cell sleeping past --timeout ends well.
    with running_kernel(flags=["--timeout", "3", "--debug-pause", "1h"]) as (km, kc):
        start_debugging(kc)
        reply, outputs, took = timed(kc, PAUSE + "import time\ntime.sleep(6)\nprint('woke')\n")
        assert reply["content"]["status"] == "ok", reply["content"]
        assert stdout_of(outputs) == "woke\n" and took >= 6


def test_a_forged_pause_does_not_stop_the_clock_of_a_busy_cell():
    # On the old code the loop ran on for --debug-pause (an hour): the reply never came.
    with running_kernel(flags=["--timeout", "5", "--debug-pause", "1h"]) as (km, kc):
        start_debugging(kc)
        reply, _, took = timed(kc, PAUSE + "while True:\n    pass\n", timeout=40)
        content = reply["content"]
        assert content["status"] == "error" and content["ename"] == "TimeoutError", content
        assert "said it was paused" in content["evalue"], content["evalue"]
        # Ended by the 5 s limit, the interrupt honoured: nothing near the hour.
        assert took < 5 + 2 + 10, took
        # Bad input changes nothing else: the session goes on, the next cell on its own clock.
        reply, outputs = execute(kc, "print('next')")
        assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "next\n"


def test_a_cell_whose_cpu_runs_ahead_of_the_wall_clock_is_capped_when_cpu_equals_timeout():
    # --cpu is --timeout (the default). A cell's CPU runs ahead of its wall clock whenever more
    # than one thread or process spins, and when CPU spent between cells is charged to it: here
    # the latter, which does not hang on how many cores the host spares the test. The old code
    # checked CPU only when --cpu was below --timeout: the cell ran to the wall clock, at 19 s
    # of CPU under --cpu 10.
    with running_kernel(flags=["--timeout", "10"]) as (km, kc):
        reply, _ = execute(kc, "import threading, time\n"
                               "def burn():\n"
                               "    while time.thread_time() < 9.0: pass\n"
                               "    print('burnt', flush=True)\n"
                               "threading.Thread(target=burn, daemon=True).start()")
        assert reply["content"]["status"] == "ok"
        # Printed between cells, so parented to the last one: 9 s of CPU spent before cell 2.
        assert wait_for_stream(kc, reply["parent_header"]["msg_id"], "burnt", timeout=120)
        reply, _, _ = timed(kc, "while True:\n    pass\n", timeout=60)
        content = reply["content"]
        assert content["status"] == "error" and content["ename"] == "TimeoutError", content
        assert "CPU-time limit of 10 s (--cpu)" in content["evalue"], content["evalue"]
        facts = reply["metadata"]["belljar"]
        assert facts["limit_hit"] == "cpu", facts
        assert facts["background_cpu_ms"] >= 9000 and facts["wall_ms"] < 10_000, facts
        reply, outputs = execute(kc, "print('next')")
        assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "next\n"


def test_a_single_spinning_thread_still_meets_the_wall_clock_first():
    # The control: CPU no faster than the wall clock is ended by --timeout, as before.
    with running_kernel(flags=["--timeout", "3"]) as (km, kc):
        reply, _, _ = timed(kc, "while True:\n    pass\n", timeout=40)
        assert reply["metadata"]["belljar"]["limit_hit"] == "timeout", reply["metadata"]
        assert "wall-clock limit of 3 s" in reply["content"]["evalue"]



# --- finding 5: everything the client receives is charged, debug events included ---

MiB = 1 << 20
NOTICE_SLACK = 4096  # the supervisor's own notice, and a message's framing


def stopped_flood(count, size):
    """A cell that forges `count` DAP `stopped` events of `size` bytes each on fd 4."""
    return FORGE + (
        f"pad = 'x' * {size}\n"
        f"for seq in range({count}):\n"
        "    forge({'type': 'debug_event', 'content': {'type': 'event', 'seq': seq,\n"
        "           'event': 'stopped', 'body': {'reason': 'breakpoint', 'threadId': 1,\n"
        "                                        'description': pad}}})\n"
    )


def debug_events_after(kc, code):
    """Runs `code`, then a debugInfo round (its reply comes on fd 4 after every frame the cell
    wrote there, its idle on IOPub after every event they made); the cell's reply, the `stopped`
    (and `terminated`) events and the stderr text seen on IOPub meanwhile."""
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=TIMEOUT)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=TIMEOUT)
    content = {"type": "request", "seq": 2, "command": "debugInfo"}
    info = kc.session.msg("debug_request", content)
    kc.control_channel.send(info)
    events, stderr, idle = [], [], set()
    deadline = time.monotonic() + TIMEOUT
    while not {msg_id, info["header"]["msg_id"]} <= idle:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["msg_type"] == "debug_event" and msg["content"].get("event") in ("stopped", "terminated"):
            events.append(msg)
        elif msg["msg_type"] == "stream" and msg["content"]["name"] == "stderr":
            stderr.append(msg["content"]["text"])
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            idle.add(msg["parent_header"].get("msg_id"))
    return reply, events, "".join(stderr)


def test_forged_stopped_events_are_charged_to_the_output_budget():
    # On the old code each `stopped` event under 64 KiB passed past the budget uncounted: this
    # flood carried 500 x 12 KiB = 5.9 MiB to the client under --output-limit 1M.
    with running_kernel(flags=["--output-limit", "1M"]) as (km, kc):
        start_debugging(kc)
        reply, events, stderr = debug_events_after(kc, stopped_flood(500, 12 << 10))
        assert reply["content"]["status"] == "ok", reply["content"]
        delivered = sum(len(json.dumps(m["content"])) for m in events)
        assert delivered <= 1 * MiB, delivered
        assert len(events) < 500
        # The essential event that did not fit ended the debug session, and the learner is told;
        # the frontend's debugger gets DAP's `terminated` from the supervisor, last.
        assert "the debug session was ended" in stderr and "--output-limit" in stderr, stderr
        assert [m["content"]["event"] for m in events[-1:]] == ["terminated"], events[-1:]
        assert {m["content"]["event"] for m in events[:-1]} == {"stopped"}
        # Its events are no longer relayed; the kernel serves on.
        _, events, _ = debug_events_after(kc, stopped_flood(1, 100))
        assert events == []
        reply, outputs = execute(kc, "print('next')")
        assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "next\n"


def test_a_forged_stopped_event_within_the_budget_reaches_the_client():
    # The control: the forged frame is relayed as the debugger's own would be.
    with running_kernel(flags=["--output-limit", "1M"]) as (km, kc):
        start_debugging(kc)
        reply, events, stderr = debug_events_after(kc, stopped_flood(3, 1000))
        assert reply["content"]["status"] == "ok", reply["content"]
        assert [m["content"]["event"] for m in events] == ["stopped"] * 3
        assert "debug session was ended" not in stderr


def test_an_essential_event_larger_than_an_event_may_be_ends_the_session():
    with running_kernel(flags=["--output-limit", "8M"]) as (km, kc):
        start_debugging(kc)
        reply, events, stderr = debug_events_after(kc, stopped_flood(1, 60 << 10))
        assert "larger than the 16 KiB" in stderr, stderr
        assert [m["content"] for m in events] == [{"seq": 0, "type": "event", "event": "terminated",
                                                   "body": {}}], events
