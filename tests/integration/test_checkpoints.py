"""Checkpoints through a real jupyter_client: %checkpoint, %rollback, %checkpoints and
%drop_checkpoint in a notebook's cells (worker/belljar_worker/checkpoints.py,
kernel/session/checkpoints.hpp). The session's memory comes back exactly, as many times as
asked; the execution count with it; the workspace is listed, not restored; the session a
rollback made is the session in every way (output in order, interrupts, a crash reported as a
crash, shutdown); a checkpoint's pages are the session's memory.
"""
import json
import os
import shutil

import pytest

from belljar_testing import (
    execute,
    interrupt_and_wait,
    kernel_info,
    of_type,
    readme_blocks,
    running_kernel,
    sandbox_writable_dir,
    stderr_of,
    stdout_of,
    still_answers,
    wait_for_stream,
)

PYTHON = os.environ.get("BELLJAR_SANDBOX_VENV_PYTHON", "/usr/bin/python3")


def ok(kc, code, **options):
    reply, outputs = execute(kc, code, **options)
    assert reply["content"]["status"] == "ok", (code, reply["content"], stderr_of(outputs))
    return reply, outputs


def shown(outputs):
    """Everything a cell showed as text: its stdout and its displays' text/plain."""
    text = stdout_of(outputs)
    for msg in of_type(outputs, "display_data"):
        text += msg["content"]["data"].get("text/plain", "") + "\n"
    return text


def failed(kc, code):
    reply, outputs = execute(kc, code)
    assert reply["content"]["status"] == "error", (code, reply["content"])
    return reply["content"]["evalue"]


def value(kc, expression):
    _, outputs = ok(kc, "import json as _j; print(_j.dumps(%s))" % expression)
    return json.loads(stdout_of(outputs).strip().splitlines()[-1])


@pytest.fixture(scope="module")
def kernel():
    workspace = sandbox_writable_dir("belljar-ckpt-ws-")
    try:
        with running_kernel(flags=["--python", PYTHON, "--checkpoints", "3", "--memory", "1G"],
                            workspace=workspace) as (km, kc):
            yield km, kc, workspace
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def test_a_rollback_brings_the_memory_and_the_count_back_exactly(kernel):
    km, kc, _ = kernel
    ok(kc, "import numpy as np\nframe = np.arange(1_000_000) * 2\n"
           "book = {'a': [1, 2, 3], 'nested': {'x': frame[:5].tolist()}}\n"
           "class Thing:\n    def __init__(self): self.calls = 0\nthing = Thing()")
    reply, outputs = ok(kc, "%checkpoint clean")
    kept_at = reply["content"]["execution_count"]
    assert "checkpoint 'clean' kept (In [%d])" % kept_at in stdout_of(outputs)
    # Wreck everything: values, a new module, an object's state, a name removed.
    ok(kc, "import fractions\nframe[:] = -1\nbook['a'].clear()\nthing.calls = 99\ndel Thing\n"
           "junk = 'x' * 10_000_000")
    ok(kc, "print('wrecked')")
    reply, outputs = ok(kc, "%rollback clean")
    assert "rolled back to 'clean' (In [%d])" % kept_at in shown(outputs)
    assert value(kc, "int(frame.sum())") == 2 * sum(range(1_000_000))
    assert value(kc, "book") == {"a": [1, 2, 3], "nested": {"x": [0, 2, 4, 6, 8]}}
    assert value(kc, "[thing.calls, 'Thing' in dir(), 'junk' in dir()]") == [0, True, False]
    assert value(kc, "'fractions' in __import__('sys').modules") is False
    # The count is the checkpoint's: the cells after it are numbered from there again (the
    # four value() cells above took the next four).
    reply, _ = ok(kc, "pass")
    assert reply["content"]["execution_count"] == kept_at + 5
    # The same checkpoint again, after more changes: it was kept.
    ok(kc, "frame[:] = 7")
    ok(kc, "%rollback clean")
    assert value(kc, "int(frame[:3].sum())") == 6


def test_checkpoints_are_listed_dropped_and_bounded(kernel):
    km, kc, _ = kernel
    for name in ("one", "two", "three"):
        ok(kc, "%checkpoint " + name)
    _, outputs = ok(kc, "%checkpoint four")
    # --checkpoints 3: 'clean', from the test before, and then 'one' went.
    assert "was dropped (--checkpoints 3)" in stdout_of(outputs)
    _, outputs = ok(kc, "%checkpoints")
    listed = [line.split()[0] for line in stdout_of(outputs).strip().splitlines()]
    assert listed == ["two", "three", "four"]
    _, outputs = ok(kc, "%drop_checkpoint three")
    assert "dropped checkpoint 'three'" in stdout_of(outputs)
    assert "no checkpoint 'three'" in failed(kc, "%rollback three")
    # Rolling back to an older one keeps the newer: any of them can be returned to.
    ok(kc, "marker = 'two'")
    ok(kc, "%checkpoint five")
    ok(kc, "%rollback two")
    assert value(kc, "'marker' in dir()") is False
    ok(kc, "%rollback five")
    assert value(kc, "marker") == "two"


def test_bad_checkpoint_cells_get_one_clear_error_and_change_nothing(kernel):
    km, kc, _ = kernel
    ok(kc, "%checkpoint steady")
    for code, why in [("%checkpoint two words", "usage: %checkpoint [NAME]"),
                      ("%checkpoint bad;name", "a checkpoint's name is 1 to 64"),
                      ("%checkpoint steady", "a checkpoint named 'steady' exists"),
                      ("%rollback never-made", "no checkpoint 'never-made'"),
                      ("%rollback ckpt_00000000000000000000000000000000", "no checkpoint"),
                      ("x = 1\n%rollback steady", "must be the only code in its cell"),
                      ("%rollback steady\nx = 1", "must be the only code in its cell"),
                      ("%checkpoints now", "usage: %checkpoints"),
                      ("%drop_checkpoint", "usage: %drop_checkpoint NAME")]:
        assert why in failed(kc, code), code
    _, outputs = ok(kc, "%checkpoints")
    assert stdout_of(outputs).count("steady") == 1
    still_answers(km, kc)


def test_a_rollback_lists_what_changed_in_the_workspace(kernel):
    km, kc, workspace = kernel
    ok(kc, "import os\nopen('kept.txt', 'w').write('1')\nopen('doomed.txt', 'w').write('2')\n"
           "open('moved.txt', 'w').write('3')\nos.makedirs('sub', exist_ok=True)")
    ok(kc, "%checkpoint files")
    ok(kc, "os.remove('doomed.txt')\nos.rename('moved.txt', 'sub/arrived.txt')\n"
           "open('sub/new.txt', 'w').write('4')")
    reply, outputs = ok(kc, "%rollback files")
    displays = of_type(outputs, "display_data")
    assert displays, outputs
    changes = displays[-1]["content"]["data"]["application/vnd.belljar.checkpoint+json"]
    assert changes["workspace"] == {"made": ["sub/new.txt"], "removed": ["doomed.txt"],
                                    "renamed": [["moved.txt", "sub/arrived.txt"]]}
    text = shown(outputs)
    assert "made since: sub/new.txt" in text and "removed since: doomed.txt" in text
    assert "moved.txt -> sub/arrived.txt" in text
    # The files are as the cells left them: a rollback restores memory, not the workspace.
    assert (workspace / "sub" / "new.txt").read_text() == "4"


def test_the_session_a_rollback_made_is_the_session(kernel):
    km, kc, _ = kernel
    ok(kc, "%checkpoint live")
    ok(kc, "%rollback live")
    # Output, in order, printed and written by a subprocess.
    _, outputs = ok(kc, "import subprocess, sys\nprint('a', flush=True)\n"
                        "subprocess.run([sys.executable, '-c', 'print(\"b\")'])\nprint('c')")
    assert stdout_of(outputs) == "a\nb\nc\n"
    # An interrupt lands in the new worker's cell, and the session lives on. (Sent once the
    # cell runs in the worker: its own output says so. An interrupt that lands before is for
    # no cell, and is ignored, as between cells.)
    msg_id = kc.execute("import time\nprint('running', flush=True)\n"
                        "for _ in range(600): time.sleep(0.1)")
    assert wait_for_stream(kc, msg_id, "running")
    interrupt_and_wait(kc)
    reply = kc.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=60)
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    still_answers(km, kc)
    # Only the processes a checkpoint needs are in the sandbox: the anchor, the live worker,
    # one holder per checkpoint; no zombie of a handed-over worker stays.
    states = value(kc, "[open(f'/proc/{p}/stat').read().split(')')[-1].split()[0] "
                       "for p in __import__('os').listdir('/proc') if p.isdigit() and p != '1']")
    assert "Z" not in states, states


def test_a_crash_after_a_rollback_is_reported_as_a_crash_and_the_checkpoints_go():
    with running_kernel(flags=["--python", PYTHON]) as (km, kc):
        ok(kc, "%checkpoint here")
        ok(kc, "%rollback here")
        reply, outputs = execute(kc, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
        assert reply["content"]["status"] == "error"
        evalue = reply["content"]["evalue"]
        assert "SIGKILL" in evalue or "signal 9" in evalue, reply["content"]
        still_answers(km, kc)
        _, outputs = ok(kc, "%checkpoints")
        assert "no checkpoints in this session" in stdout_of(outputs)


def test_a_checkpoints_pages_are_charged_to_the_sessions_memory():
    # 300 MB of live data and a checkpoint of it share their pages; once the session writes
    # every page, the copies are the session's memory too: the cgroup's peak counts both.
    with running_kernel(flags=["--python", PYTHON, "--memory", "2G"]) as (km, kc):
        if any("warden samples the session's total" in note
               for note in kernel_info(kc)["belljar"]["notes"]):
            pytest.skip("no memory cgroup: the peak is the worker's alone")
        ok(kc, "import numpy as np\nbig = np.ones(300 * 2**20 // 8)")
        reply, _ = ok(kc, "%checkpoint shared")
        before = reply["metadata"]["belljar"]["peak_memory_bytes"]
        assert before < 450 << 20, before
        reply, _ = ok(kc, "big[:] = 2.0")
        assert reply["metadata"]["belljar"]["peak_memory_bytes"] > 580 << 20, reply["metadata"]


def test_a_checkpoints_copied_pages_count_against_the_memory_limit():
    # Under a limit the copies do not fit: the session passed its memory limit, as with any
    # other pages of its own, and was restarted; its checkpoints went with it. (The cgroup's
    # OOM killer, or without a cgroup the warden's sum over every process.)
    with running_kernel(flags=["--python", PYTHON, "--memory", "512M"]) as (km, kc):
        ok(kc, "import numpy as np\nbig = np.ones(300 * 2**20 // 8)")
        ok(kc, "%checkpoint shared")
        reply, _ = execute(kc, "big[:] = 2.0\nprint('diverged')")
        assert reply["content"]["ename"] == "MemoryError", reply["content"]
        assert "passed its memory limit of 512.0 MiB" in reply["content"]["evalue"]
        still_answers(km, kc)
        _, outputs = ok(kc, "%checkpoints")
        assert "no checkpoints in this session" in stdout_of(outputs)


def test_checkpoints_off_refuse_with_the_reason():
    with running_kernel(flags=["--python", PYTHON, "--checkpoints", "0"]) as (km, kc):
        assert "--checkpoints 0" in failed(kc, "%checkpoint x")
        still_answers(km, kc)


def test_without_a_sandbox_a_checkpoint_could_not_be_charged_and_is_refused():
    flags = ["--python", PYTHON, "--isolation", "none", "--memory", "1G"]
    with running_kernel(flags=flags) as (km, kc):
        assert "nothing sums the session's memory" in failed(kc, "%checkpoint x")
        still_answers(km, kc)


def test_the_readmes_undo_example_works_as_shown():
    blocks = readme_blocks("python")
    start = next(i for i, b in enumerate(blocks) if b.strip() == "%checkpoint cleaned")
    cells = blocks[start:start + 3]
    assert cells[2].strip() == "%rollback cleaned", cells
    with running_kernel(flags=["--python", PYTHON]) as (km, kc):
        ok(kc, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})")
        for cell in cells:
            ok(kc, cell)
        assert value(kc, "list(df.columns)") == ["a", "b"]


# The outside review of checkpoints: what it did to the hand-over, each now refused or harmless.
HOLDER_FORKED = """
import os, signal, threading, belljar_worker.checkpoints as ckpt
holder = ckpt.HOLDERS.table[next(iter(ckpt.HOLDERS.table))][0]
def interrupt_when_forked():
    children = f'/proc/{holder}/task/{holder}/children'
    while not open(children).read().strip():
        pass
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupt_when_forked, daemon=True).start()
"""


def test_an_interrupt_during_a_rollback_never_leaves_two_workers():
    with running_kernel(flags=["--python", PYTHON, "--timeout", "60"]) as (km, kc):
        ok(kc, "x = 'before'")
        ok(kc, "%checkpoint a")
        ok(kc, "x = 'after'")
        ok(kc, HOLDER_FORKED)
        ok(kc, "%rollback a")
        answers = {tuple(value(kc, "[x, __import__('os').getpid()]")) for _ in range(6)}
        assert len(answers) == 1 and next(iter(answers))[0] == "before", answers


def test_a_rollback_that_failed_before_the_hand_over_changed_nothing():
    with running_kernel(flags=["--python", PYTHON]) as (km, kc):
        ok(kc, "x = 1")
        ok(kc, "%checkpoint a")
        ok(kc, "x = 2")
        ok(kc, "%checkpoint b")
        ok(kc, "x = 3")
        ok(kc, "import belljar_worker.checkpoints as ckpt\nreal = ckpt._send_bundle\n"
               "def once(*args):\n    ckpt._send_bundle = real\n    raise RuntimeError('no')\n"
               "ckpt._send_bundle = once")
        assert "no" in failed(kc, "%rollback a")
        assert value(kc, "x") == 3
        _, outputs = ok(kc, "%checkpoints")
        assert [line.split()[0] for line in stdout_of(outputs).splitlines()] == ["a", "b"]
        # The first worker never became the anchor: the next rollback makes it so, and the
        # session lives through it.
        ok(kc, "%rollback b")
        assert value(kc, "x") == 2
        ok(kc, "%rollback a")
        assert value(kc, "x") == 1


def test_a_thread_sending_frames_during_a_rollback_cuts_no_frame():
    with running_kernel(flags=["--python", PYTHON, "--timeout", "30"]) as (km, kc):
        ok(kc, "x = 'kept'")
        ok(kc, "%checkpoint a")
        ok(kc, "import threading\nfrom IPython.display import display\n"
               "def flood():\n    while True:\n"
               "        display({'text/plain': 'z' * 400_000}, raw=True)\n"
               "threading.Thread(target=flood, daemon=True).start()")
        for _ in range(3):
            ok(kc, "%rollback a")
            assert value(kc, "x") == "kept"
