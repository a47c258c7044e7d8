"""The worker runs in the sandbox's own Python, whatever version the user's is: CPython 3.8 (the
oldest with top-level await in the compiler, which the worker needs) to 3.13. Each cell here is
something a notebook does in its first minutes, run through a real kernel on the oldest and the
newest interpreter this machine has (pyenv's builds, or BELLJAR_TEST_PYTHONS=PATH:PATH), with
none of IPython, numpy or the comm package installed: the worker must stand on the standard
library alone."""
import json
import os
import pathlib
import subprocess

import pytest

from belljar_testing import (
    execute,
    of_type,
    running_kernel,
    stderr_of,
    stdout_of,
    wait_for_stream,
)

OLDEST, NEWEST = (3, 8), (3, 13)


def version_of(python):
    done = subprocess.run([python, "-c", "import sys; print(list(sys.version_info[:2]))"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return None
    return tuple(json.loads(done.stdout))


def interpreters():
    """The oldest and the newest supported interpreter found here, or none."""
    given = os.environ.get("BELLJAR_TEST_PYTHONS")
    if given:
        candidates = given.split(":")
    else:
        root = pathlib.Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"
        try:
            candidates = sorted(str(p / "bin" / "python3") for p in root.iterdir())
        except OSError:  # no pyenv, or one this user cannot enter
            candidates = []
    found = {}
    for python in candidates:
        version = version_of(python) if os.access(python, os.X_OK) else None
        if version and OLDEST <= version <= NEWEST:
            found[version] = python
    if not found:
        return []
    ends = sorted(found)
    return [found[ends[0]], found[ends[-1]]] if len(ends) > 1 else [found[ends[0]]]


PYTHONS = interpreters()


def label(python):
    return "none-here" if python is None else ".".join(map(str, version_of(python)))


@pytest.fixture(scope="module", params=PYTHONS or [None], ids=label)
def kernel(request):
    if request.param is None:
        pytest.skip("no CPython 3.8-3.13 besides Debian's here (pyenv, or BELLJAR_TEST_PYTHONS)")
    with running_kernel(flags=["--python", request.param]) as (km, kc):
        yield request.param, km, kc


def test_the_session_is_that_python(kernel):
    python, _, kc = kernel
    reply, out = execute(kc, "import sys\nprint(sys.version_info[:2])")
    assert reply["content"]["status"] == "ok", out
    assert stdout_of(out).strip() == str(version_of(python))


def test_state_results_displays_and_top_level_await(kernel):
    _, _, kc = kernel
    execute(kc, "total = 0\nfor n in range(10):\n    total += n")
    reply, out = execute(kc, "total * 2")
    assert of_type(out, "execute_result")[0]["content"]["data"]["text/plain"] == "90"
    reply, out = execute(kc, "class Card:\n    def _repr_html_(self):\n        return '<b>card</b>'\n"
                             "Card()")
    data = of_type(out, "execute_result")[0]["content"]["data"]
    assert data["text/html"] == "<b>card</b>", data
    reply, out = execute(kc, "import asyncio\nawait asyncio.sleep(0)\nprint('awaited')")
    assert reply["content"]["status"] == "ok" and stdout_of(out) == "awaited\n", out


def test_a_task_runs_between_cells_on_the_loop_get_event_loop_gives(kernel):
    """3.8's get_event_loop() makes a loop where 3.12 warns and 3.14 raises: the session's is
    set as soon as asyncio is imported, so every version gets the one that runs between cells."""
    _, _, kc = kernel
    msg_id = kc.execute("import asyncio\n"
                        "async def later():\n"
                        "    await asyncio.sleep(0.01)\n"
                        "    print('ran between cells', flush=True)\n"
                        "task = asyncio.get_event_loop().create_task(later())")
    assert wait_for_stream(kc, msg_id, "ran between cells") is not None
    reply, out = execute(kc, "print(task.done(), asyncio.get_event_loop() is task.get_loop())")
    assert stdout_of(out) == "True True\n" and stderr_of(out) == "", out  # no warning


def test_an_error_shows_its_traceback(kernel):
    _, _, kc = kernel
    reply, out = execute(kc, "def f():\n    return 1 / 0\nf()")
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "ZeroDivisionError"
    text = "\n".join(of_type(out, "error")[0]["content"]["traceback"])
    assert "return 1 / 0" in text, text


def test_completion_inspection_and_input(kernel):
    _, _, kc = kernel
    execute(kc, "import os")
    msg_id = kc.complete("os.pat", 6)
    reply = kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id
    content = reply["content"]
    assert content["cursor_start"] == 3 and "path" in content["matches"], content
    msg_id = kc.inspect("len", 3)
    reply = kc.get_shell_msg(timeout=30)
    assert reply["content"]["found"], reply["content"]
    msg_id = kc.execute("name = input('who? ')\nprint('hello', name)", allow_stdin=True)
    request = kc.get_stdin_msg(timeout=30)
    assert request["content"]["prompt"] == "who? "
    kc.input("learner")
    reply = kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "ok"


def test_an_interrupt_ends_a_running_cell_and_keeps_the_session(kernel):
    _, km, kc = kernel
    execute(kc, "kept = 'yes'")
    msg_id = kc.execute("import time\nprint('running', flush=True)\nwhile True: time.sleep(0.05)")
    assert wait_for_stream(kc, msg_id, "running") is not None
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    reply, out = execute(kc, "print(kept)")
    assert stdout_of(out) == "yes\n"
