"""What a notebook or a client meets the same way on belljar as on ipykernel (issue 30), each
check run on both kernels, Debian's ipykernel as the control, through real jupyter_client.

- A kernel follows the client that launched it: when the client is killed, the kernel shuts
  down (jupyter_client sets JPY_PARENT_PID; ipykernel polls for its parent, belljar watches it
  through a pidfd) rather than leave its sandbox running for no one.
- `get_ipython()` exists from the first cell (libraries and notebooks call it before anything
  else), without belljar paying for IPython in cells that never ask.
- Small things users see (issue 30, item 6): `obj?` and Shift-Tab read as IPython's inspector
  writes them; `%config InlineBackend.figure_format` and set_matplotlib_formats choose the
  figures' formats; the inline backend answers to matplotlib_inline's name. These run in the
  learner's venv too (IPython 9, matplotlib 3.11), on belljar alone: it has no ipykernel.
- The session's asyncio loop runs between cells (issue 30, item 4): a task a cell created
  ticks, prints and moves a widget while no cell runs, its output parented to the cell that made
  it (its widget messages to the last cell), and
  `%gui asyncio` is accepted. belljar bounds that output, and stays interruptible under it.
"""
import base64
import bisect
import inspect
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import psutil
import pytest

from belljar_testing import (
    PYTHON,
    SANDBOX_VENV_PYTHON,
    TIMEOUT,
    collect,
    execute,
    install_kernelspec,
    interrupt_and_wait,
    of_type,
    printed_json,
    running_kernel,
    sandbox_writable_dir,
    send_comm,
    shell_read_fence,
    started_from,
    stderr_of,
    stdout_of,
    wait_for_iopub,
    wait_for_stream,
)

KERNELS = ("belljar", "ipykernel")
# belljar in the learner's venv as well, for checks that need no ipykernel beside it.
EACH_PYTHON = (*KERNELS, "belljar-venv")


@pytest.fixture(scope="module")
def specs():
    """Both kernelspecs in one private prefix: its share/jupyter, for JUPYTER_PATH; belljar's
    audit log goes to a file there."""
    with tempfile.TemporaryDirectory(prefix="belljar-parity-") as prefix:
        audit = pathlib.Path(prefix) / "audit.jsonl"
        install_kernelspec(prefix, "belljar", flags=["--audit-log", str(audit)])
        install_kernelspec(prefix, "belljar-venv", flags=[
            "--audit-log", str(pathlib.Path(prefix) / "audit-venv.jsonl"),
            "--python", SANDBOX_VENV_PYTHON])
        ipykernel = pathlib.Path(prefix) / "share" / "jupyter" / "kernels" / "ipykernel"
        ipykernel.mkdir(parents=True)
        (ipykernel / "kernel.json").write_text(json.dumps({
            "argv": [PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)", "language": "python"}))
        yield pathlib.Path(prefix) / "share" / "jupyter", audit


# A client as a notebook server or a test runner is one: it starts a kernel with jupyter_client
# (which sets JPY_PARENT_PID to its own pid), says the kernel's pid, and waits to be killed.
CLIENT = textwrap.dedent("""
    import sys
    from jupyter_client.manager import KernelManager
    km = KernelManager(kernel_name=sys.argv[1])
    km.start_kernel(cwd=sys.argv[2])
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    print(km.provisioner.process.pid, flush=True)
    sys.stdin.read()
""")


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_kernel_whose_client_was_killed_shuts_down(specs, kernel):
    share, audit = specs
    workspace = sandbox_writable_dir("belljar-parity-ws-")
    client = subprocess.Popen([sys.executable, "-c", CLIENT, kernel, workspace],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, JUPYTER_PATH=str(share)))
    try:
        pid = int(client.stdout.readline())
        process = psutil.Process(pid)
        assert process.is_running()
    finally:
        client.send_signal(signal.SIGKILL)  # no shutdown_request: the client is simply gone
        client.wait()
    try:
        process.wait(timeout=TIMEOUT)  # psutil.TimeoutExpired: the kernel outlived its client
    except psutil.TimeoutExpired:
        process.kill()
        raise
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    if kernel == "belljar":
        last = json.loads(audit.read_text().splitlines()[-1])
        assert last["event"] == "shutdown", last  # a clean shutdown: its sandbox went with it


def test_a_kernel_without_a_client_to_follow_keeps_serving():
    """Started without JPY_PARENT_PID (a gateway's pod, `belljar kernel` by hand), nothing is
    followed: the kernel answers as usual (running_kernel's client is this process, which
    lives, so the watch is tested by the case above)."""
    env = {k: v for k, v in os.environ.items() if k != "JPY_PARENT_PID"}
    with running_kernel(env=env) as (_, kc):
        reply, outputs = execute(kc, "print(6 * 7)")
        assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "42\n"


def started(share, name):
    """A kernel of the prefix's kernelspec `name` in a workspace of its own, and a ready client."""
    return started_from(share / "kernels", name)


@pytest.fixture(scope="module", params=KERNELS)
def kernel_manager(request, specs):
    with started(specs[0], request.param) as (km, kc):
        yield km, kc


@pytest.fixture(scope="module")
def kernel(kernel_manager):
    km, kc = kernel_manager
    return km.kernel_name, kc


def test_get_ipython_exists_from_the_first_cell(kernel):
    name, kc = kernel
    reply, outputs = execute(kc, "import sys\n"
                                 "before = 'IPython' in sys.modules\n"
                                 "shell = get_ipython()\n"
                                 "print(type(shell).__name__ != 'NoneType', callable(shell.run_line_magic),\n"
                                 "      get_ipython() is shell, before)")
    assert reply["content"]["status"] == "ok", stderr_of(outputs)
    shown = stdout_of(outputs).split()
    assert shown[:3] == ["True", "True", "True"]
    if name == "belljar":
        assert shown[3] == "False"  # IPython was loaded by the call, not before
    reply, outputs = execute(kc, "get_ipython().run_line_magic('config', 'HistoryManager.enabled')")
    assert reply["content"]["status"] == "ok", stderr_of(outputs)


INDENTED_CELL = '''
    total = 0
    for i in range(3):
        total += i
    text = """
kept
"""
    print(total, repr(text))
'''


def test_a_cell_indented_as_a_whole_runs_as_it_reads(kernel):
    """IPython takes a cell's first-line indentation off (code pasted from inside a function,
    a test's triple-quoted string): the same cell runs on both. belljar keeps the blank lines
    above it, so a traceback's line is the one the user sees (IPython drops them: line 1)."""
    name, kc = kernel
    reply, outputs = execute(kc, INDENTED_CELL)
    assert reply["content"]["status"] == "ok", stderr_of(outputs)
    assert stdout_of(outputs) == "3 '\\nkept\\n'\n"
    # stop_on_error=False, as traceback_of: the module's next test's first cell was aborted by
    # ipykernel 6 (what arrives just after an error reply), once in CI as nobody.
    reply, outputs = execute(kc, "\n\n    1/0\n", stop_on_error=False)
    assert reply["content"]["evalue"] == "division by zero"
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "".join(reply["content"]["traceback"]))
    assert ("----> 3 1/0" if name == "belljar" else "----> 1 1/0") in shown


def payload_of(kc, code):
    reply, outputs = execute(kc, code)
    assert reply["content"]["status"] == "ok", (reply["content"], stderr_of(outputs))
    return reply["content"]["payload"]


def test_payloads_fill_the_next_cell_page_help_and_ask_to_exit(kernel):
    """execute_reply's payload, which frontends act on: %load's text for the next cell and
    `obj?` in the pager (issue 30, item 2)."""
    _, kc = kernel
    # Written and closed before %load reads it; the write's status and its path are kept in
    # the assertion (the control once did not find the file in CI, not reproduced).
    written, outputs = execute(kc, "import os\nwith open('snippet.py', 'w') as f:\n"
                                   "    f.write('x = 1\\n')\nprint(os.path.abspath('snippet.py'))")
    assert written["content"]["status"] == "ok", stderr_of(outputs)
    assert payload_of(kc, "%load snippet.py") == [
        {"source": "set_next_input", "text": "# %load snippet.py\nx = 1\n", "replace": True}]
    assert payload_of(kc, "get_ipython().set_next_input('y = 2')") == [
        {"source": "set_next_input", "text": "y = 2", "replace": False}]
    [page] = payload_of(kc, "len?")
    assert page["source"] == "page" and page["start"] == 0
    assert "Return the number of items in a container" in page["data"]["text/plain"]
    assert payload_of(kc, "print('plain')") == []


@pytest.mark.parametrize("name", KERNELS)
def test_exit_asks_the_frontend_to_end_the_session(specs, name):
    """`exit` and `quit` send ask_exit (jupyter console quits and shuts the kernel down).
    ipykernel also ends itself at once; belljar leaves that to the frontend, so a stray `exit`
    in a notebook does not cost the session (each kernel here is its own: ipykernel's goes)."""
    with started(specs[0], name) as (_, kc):
        assert payload_of(kc, "quit") == [{"source": "ask_exit", "keepkernel": False}]


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def traceback_of(kc, code):
    # stop_on_error=False: the error is the point, and the module's next test must not have its
    # first cell aborted (ipykernel 6 aborts what arrives just after an error reply).
    reply, outputs = execute(kc, code, stop_on_error=False)
    [error] = [m["content"] for m in outputs if m["msg_type"] == "error"]
    assert reply["content"]["traceback"] == error["traceback"]
    return [ANSI.sub("", entry) for entry in error["traceback"]]


def test_a_traceback_has_ipythons_shape_one_entry_per_frame(kernel):
    """Frontends and nbclient's CellExecutionError join and parse the list as IPython shapes
    it: a rule, a header, one entry per frame, the exception (issue 30, item 5)."""
    name, kc = kernel
    entries = traceback_of(kc, "def f():\n    return 1 / 0\nf()")
    assert len(entries) == 5, entries
    assert entries[0] == "-" * 75
    assert re.match(r"ZeroDivisionError +Traceback \(most recent call last\)$", entries[1])
    assert re.match(r"Cell In ?\[\d+\], line 3\n", entries[2]) and entries[2].endswith("f()\n")
    assert re.match(r"Cell In ?\[\d+\], line 2, in f\(?\)?\n", entries[3])
    assert entries[3].endswith("return 1 / 0\n")
    assert entries[4] == "ZeroDivisionError: division by zero"
    if name == "belljar":  # Debian's ipykernel sent no error output for this once in CI
        entries = traceback_of(kc, "raise KeyboardInterrupt")
        assert entries[-1] == "KeyboardInterrupt: "


def interrupted_at_prompt(km, kc, code):
    """Runs code that waits at a prompt (input(), pdb's), interrupts it once the prompt is
    asked, and returns the reply's content and the cell's outputs."""
    msg_id = kc.execute(code, allow_stdin=True)
    request = kc.get_stdin_msg(timeout=TIMEOUT)
    assert request["parent_header"]["msg_id"] == msg_id
    km.interrupt_kernel()
    return collect(kc, msg_id)


@pytest.fixture
def belljar_kernel():
    with running_kernel(flags=["--timeout", "30"]) as (km, kc):
        yield km, kc


PDB_LET_GO = "--KeyboardInterrupt--\n\nKeyboardInterrupt: Interrupted by user\n"


def test_an_interrupt_at_a_prompt_ends_the_wait_each_time(belljar_kernel):
    """input() and the debugger's prompt wait on the frontend: an interrupt there ends the wait
    at once, every time, as under ipykernel 7 (the control: the ipykernel peers' suite,
    test_interrupt_during_pdb_set_trace). input() fails the cell ("Interrupted by user"); pdb
    says so, stops debugging and the cell runs on, so the cell queued behind it runs too. The
    session's variables stay (issue 30, item 3). Before: pdb asked again and the cell ran into
    its time limit; then the interrupt failed the cell and stop_on_error aborted the queued
    one; and a signal's byte left over from an earlier interrupt let a later wait block where
    the next interrupt could not reach it."""
    km, kc = belljar_kernel
    execute(kc, "kept = 'still here'\nimport pdb")
    msg_id = kc.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(600)")
    while True:  # interrupted once it is asleep
        msg = kc.get_iopub_msg(timeout=TIMEOUT)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
            break
    km.interrupt_kernel()
    assert kc.get_shell_msg(timeout=TIMEOUT)["content"]["ename"] == "KeyboardInterrupt"
    for code, printed in [("pdb.set_trace()\nprint(1)", "1\n"),
                          ("breakpoint()\nprint(2)", "2\n"),
                          ("y = 2\nbreakpoint()\nprint(3 + y)", "5\n")]:
        reply, outputs = interrupted_at_prompt(km, kc, code)
        assert reply["content"]["status"] == "ok", (code, reply["content"])
        assert stdout_of(outputs).endswith(PDB_LET_GO + printed), stdout_of(outputs)
    for prompt in ["name? ", "again? "]:
        reply, _ = interrupted_at_prompt(km, kc, f"input({prompt!r})")
        assert (reply["content"]["ename"], reply["content"]["evalue"]) == (
            "KeyboardInterrupt", "Interrupted by user")
    # Queued behind the debugger: runs once pdb lets go (stop_on_error has nothing to abort).
    stopped = kc.execute("import pdb; pdb.set_trace()", allow_stdin=True)
    queued = kc.execute("print(kept)")
    assert kc.get_stdin_msg(timeout=TIMEOUT)["parent_header"]["msg_id"] == stopped
    km.interrupt_kernel()
    assert collect(kc, stopped)[0]["content"]["status"] == "ok"
    reply, outputs = collect(kc, queued)
    assert reply["content"]["status"] == "ok" and stdout_of(outputs) == "still here\n"
    # pdb let go for good: a later breakpoint-free cell is not traced into.
    reply, outputs = execute(kc, "import sys\nprint(sys.gettrace())")
    assert stdout_of(outputs) == "None\n"


SHOWN_NOT_FAILED = textwrap.dedent("""\
    ip = get_ipython()
    try:
        1 / 0
    except ZeroDivisionError:
        ip.showtraceback()
    print('went on')
""")


@pytest.mark.parametrize("name", ("belljar", "belljar-venv"))
def test_an_error_shown_is_not_an_error_of_the_cell(specs, name):
    """As ipykernel 7 decides a cell's status (the control: the ipykernel peers' suite,
    test_execute_reply_error_status): an error IPython shows and carries on from
    (showtraceback in an except block, %run of a script that raises, display() of a value
    whose repr raises) is an error output and the cell is ok; a repr that raises while the
    cell's own value is formatted fails the cell, its other formats still shown. Before, the
    first three failed the cell (and stop_on_error aborted what was queued), the last left it
    ok with the failure on stderr. IPython 9's traceback names the cell, one entry a frame."""
    with started(specs[0], name) as (_, kc):
        reply, outputs = execute(kc, SHOWN_NOT_FAILED)
        assert reply["content"]["status"] == "ok", reply["content"]
        [error] = of_type(outputs, "error")
        assert error["content"]["ename"] == "ZeroDivisionError"
        frames = [ANSI.sub("", entry) for entry in error["content"]["traceback"]]
        cell_frames = [f for f in frames if f.startswith("Cell In[")]
        if name == "belljar-venv":  # IPython 8 leaves out the frame of the cell that caught it
            assert len(cell_frames) == 1 and "1 / 0" in cell_frames[0], frames
        assert frames[-1] == "ZeroDivisionError: division by zero"
        assert stdout_of(outputs) == "went on\n"

        reply, outputs = execute(kc, "with open('raises.py', 'w') as f:\n"
                                     "    f.write('x = 1\\nraise ValueError(x)\\n')\n"
                                     "%run raises.py\nprint('after run')")
        assert reply["content"]["status"] == "ok", reply["content"]
        assert [e["content"]["ename"] for e in of_type(outputs, "error")] == ["ValueError"]
        assert stdout_of(outputs) == "after run\n"

        reply, outputs = execute(kc, "class Broken:\n    def __repr__(self):\n        1 / 0\n"
                                     "class NoHtml:\n    def _repr_html_(self):\n        1 / 0\n"
                                     "display(Broken())\nprint('displayed')")
        assert reply["content"]["status"] == "ok", reply["content"]
        assert [e["content"]["ename"] for e in of_type(outputs, "error")] == ["ZeroDivisionError"]
        assert not of_type(outputs, "display_data") and stdout_of(outputs) == "displayed\n"

        reply, outputs = execute(kc, "NoHtml()")
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "ZeroDivisionError"
        [result] = of_type(outputs, "execute_result")
        assert list(result["content"]["data"]) == ["text/plain"]
        reply, outputs = execute(kc, "Broken()")
        assert reply["content"]["status"] == "error" and not of_type(outputs, "execute_result")


# -- small things users see (issue 30, item 6) ----------------------------------------------

INSPECTED = textwrap.dedent('''
    import bisect
    class Greeter:
        """Says hello."""
        def __init__(self, name="world"):
            self.name = name
        def greet(self, loud=False):
            """Return a greeting."""
            return "hello " + self.name
    class Loud(Greeter):
        pass
    greeter = Greeter()
    def add(a, b=2):
        """Add two numbers."""
        return a + b
    def plot(first_series, second_series=None, *more, title="", log_scale=False, **style):
        pass
    primes = [2, 3, 5]
''')
# Each kernel names the file of a cell its own way: ipykernel, and belljar where the sandbox's
# Python can debug, by the hash JupyterLab's debugger computes; belljar otherwise by number.
CELL_FILE = re.compile(r"(?m)^(File: +)(/\S*/(?:ipykernel_\d+|belljar-debug-[0-9a-f]+)/\d+\.py"
                       r"|\S*/<belljar-cell-\d+>)$")


def inspected(kc, name, detail_level):
    """The inspector's text for `name`, without colours, object addresses or cell file names
    (IPython 8 ends it with a newline, IPython 9 not); None when the name was not found."""
    msg_id = kc.inspect(name, len(name), detail_level)
    reply = kc.get_shell_msg(timeout=TIMEOUT)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=TIMEOUT)
    content = reply["content"]
    assert content["status"] == "ok", content
    if not content["found"]:
        return None
    assert list(content["data"]) == ["text/plain"], content["data"].keys()
    text = ANSI.sub("", content["data"]["text/plain"]).rstrip("\n")
    return CELL_FILE.sub(r"\1<cell>", re.sub(r" at 0x[0-9a-f]+>", " at 0x…>", text))


def lines(*rows):
    return "\n".join(rows)


BISECT = bisect.__file__  # the sandbox reads the same standard library, at the same path
EXPECTED_INSPECTION = {
    ("Greeter", 0): lines("Init signature: Greeter(name='world')",
                          "Docstring:      Says hello.",
                          "Type:           type",
                          "Subclasses:     Loud"),
    ("greeter", 0): lines("Type:        Greeter",
                          "String form: <__main__.Greeter object at 0x…>",
                          "Docstring:   Says hello."),
    ("primes", 0): lines("Type:        list",
                         "String form: [2, 3, 5]",
                         "Length:      3",
                         "Docstring:  ",
                         inspect.getdoc(list)),
    ("add", 0): lines("Signature: add(a, b=2)",
                      "Docstring: Add two numbers.",
                      "File:      <cell>",
                      "Type:      function"),
    ("add", 1): lines("Signature: add(a, b=2)",
                      "Source:   ",
                      "def add(a, b=2):",
                      '    """Add two numbers."""',
                      "    return a + b",
                      "File:      <cell>",
                      "Type:      function"),
    ("greeter.greet", 0): lines("Signature: greeter.greet(loud=False)",
                                "Docstring: Return a greeting.",
                                "File:      <cell>",
                                "Type:      method"),
    ("plot", 0): lines("Signature:",
                       "plot(",
                       "    first_series,",
                       "    second_series=None,",
                       "    *more,",
                       "    title='',",
                       "    log_scale=False,",
                       "    **style,",
                       ")",
                       "Docstring: <no docstring>",
                       "File:      <cell>",
                       "Type:      function"),
    ("len", 0): lines("Signature: len(obj, /)",
                      "Docstring: Return the number of items in a container.",
                      "Type:      builtin_function_or_method"),
    ("bisect", 0): lines("Type:        module",
                         "String form: <module 'bisect' from '%s'>" % BISECT,
                         "File:        %s" % BISECT,
                         "Docstring:   Bisection algorithms."),
    ("bisect", 1): lines("Type:        module",
                         "String form: <module 'bisect' from '%s'>" % BISECT,
                         "File:        %s" % BISECT,
                         "Source:     ",
                         pathlib.Path(BISECT).read_text().rstrip()),
}
# Where the source is not at hand (a class or instance made in a cell, a built-in), the
# inspector's second level says what its first does.
for _name in ("Greeter", "greeter", "primes", "len"):
    EXPECTED_INSPECTION[(_name, 1)] = EXPECTED_INSPECTION[(_name, 0)]


@pytest.mark.parametrize("name", EACH_PYTHON)
def test_the_inspector_writes_what_ipythons_writes(specs, name):
    """Shift-Tab and `obj?` on a class, an instance, a function, a method, a builtin and a
    module, at both detail levels: IPython's fields, in its order and layout. belljar answers
    without IPython until a session loads it; before, an instance's docstring was titled
    'Class docstring:', a class made in a cell was not found, a function's file was left out,
    and a docstring of one line started on a line of its own. Once IPython is loaded, belljar
    sends IPython's own text, without the HTML ipykernel leaves out."""
    with started(specs[0], name) as (_, kc):
        reply, outputs = execute(kc, INSPECTED)
        assert reply["content"]["status"] == "ok", stderr_of(outputs)
        for loaded in (False, True):
            shown = {key: inspected(kc, *key) for key in EXPECTED_INSPECTION}
            mismatched = {key: text for key, text in shown.items()
                          if text != EXPECTED_INSPECTION[key]}
            assert not mismatched, (loaded, mismatched)
            if not loaded:
                reply, outputs = execute(kc, "get_ipython().run_line_magic('who_ls', '')")
                assert reply["content"]["status"] == "ok", stderr_of(outputs)


def png_size(b64):
    """(width, height) in a PNG's header."""
    png = base64.b64decode(b64)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def figure_shown(kc, code):
    """Runs code that shows one figure; returns its display_data content."""
    reply, outputs = execute(kc, code)
    assert reply["content"]["status"] == "ok", (reply["content"], stderr_of(outputs))
    [display] = of_type(outputs, "display_data")
    return display["content"]


PLOT = "plt.plot([1, 2, 3])\nplt.show()"


@pytest.mark.parametrize("name", EACH_PYTHON)
def test_figures_come_in_the_formats_the_notebook_chose(specs, name):
    """%config InlineBackend.figure_format (here run before matplotlib, as notebooks put it at
    their top) and set_matplotlib_formats choose the figures' formats: SVG (which the
    supervisor's markup check passes as inert), retina (a PNG at twice the resolution, shown at
    its 1x size), PNG with JPEG. Before, every figure stayed a PNG whatever %config said."""
    with started(specs[0], name) as (_, kc):
        reply, _ = execute(kc, "%config InlineBackend.figure_format = 'svg'")
        assert reply["content"]["status"] == "ok"
        svg = figure_shown(kc, "import matplotlib.pyplot as plt\n" + PLOT)
        assert set(svg["data"]) == {"text/plain", "image/svg+xml"}, svg["data"].keys()
        assert "<svg" in svg["data"]["image/svg+xml"] and "<path" in svg["data"]["image/svg+xml"]
        assert svg["data"]["text/plain"].startswith("<Figure size 640x480")

        png = figure_shown(kc, "%config InlineBackend.figure_format = 'png'\n" + PLOT)
        assert set(png["data"]) == {"text/plain", "image/png"} and png["metadata"] == {}
        retina = figure_shown(kc, "%config InlineBackend.figure_format = 'retina'\n" + PLOT)
        assert set(retina["data"]) == {"text/plain", "image/png"}
        width, height = png_size(retina["data"]["image/png"])
        assert retina["metadata"] == {"image/png": {"width": width // 2, "height": height // 2}}
        plain_width, plain_height = png_size(png["data"]["image/png"])
        assert abs(width - 2 * plain_width) <= 2 and abs(height - 2 * plain_height) <= 2

        both = figure_shown(kc, "from matplotlib_inline.backend_inline import "
                                "set_matplotlib_formats\n"
                                "set_matplotlib_formats('png', 'jpeg')\n" + PLOT)
        assert set(both["data"]) == {"text/plain", "image/png", "image/jpeg"}
        assert base64.b64decode(both["data"]["image/jpeg"]).startswith(b"\xff\xd8\xff")
        if name != "belljar-venv":  # IPython 9 dropped IPython.display's deprecated copy
            svg = figure_shown(kc, "import warnings\n"
                                   "warnings.simplefilter('ignore', DeprecationWarning)\n"
                                   "from IPython.display import set_matplotlib_formats\n"
                                   "set_matplotlib_formats('svg')\n" + PLOT)
            assert set(svg["data"]) == {"text/plain", "image/svg+xml"}


@pytest.mark.parametrize("name", EACH_PYTHON)
def test_the_inline_backend_answers_to_matplotlib_inlines_name(specs, name):
    """Code and libraries compare matplotlib.get_backend() with matplotlib_inline's name (and
    its alias `inline`, which `%matplotlib inline` selects where matplotlib keeps a registry of
    backends: IPython 9 with matplotlib 3.9 or later, as ipykernel 7 reports it in the venv).
    belljar's own backend, which shows the figures, answers to that name, and plotting still
    does not load IPython. Before, it said module://belljar_worker.inline_backend."""
    with started(specs[0], name) as (_, kc):
        shown, _ = printed_json(kc, "import json, sys, matplotlib, matplotlib.pyplot as plt\n"
                                    "plt.plot([1, 2])\n"
                                    "print(json.dumps([matplotlib.get_backend(),\n"
                                    "                  'IPython' in sys.modules]))")
        assert shown[0] == "module://matplotlib_inline.backend_inline"
        if name != "ipykernel":
            assert shown[1] is False
        assert "image/png" in figure_shown(kc, "plt.plot([1, 2])")["data"]
        reply, outputs = execute(kc, "%matplotlib inline\nprint(matplotlib.get_backend())")
        assert reply["content"]["status"] == "ok", stderr_of(outputs)
        expected = "inline" if name == "belljar-venv" else "module://matplotlib_inline.backend_inline"
        assert stdout_of(outputs) == expected + "\n"
        assert "image/png" in figure_shown(kc, "plt.plot([1, 2])")["data"]


# A counter task, as a notebook starts one: it says when it has ticked three times, and a
# speaker task prints whenever a later cell wakes it.
TICKER = """
import asyncio
ticks = 0
async def tick():
    global ticks
    while True:
        ticks += 1
        if ticks == 3:
            print('ticked 3 times', flush=True)
        await asyncio.sleep(0.01)
ticker = asyncio.get_event_loop().create_task(tick())
wake = asyncio.Event()
async def speak():
    while True:
        await wake.wait()
        wake.clear()
        print('spoke', flush=True)
speaker = asyncio.ensure_future(speak())
"""


@pytest.mark.parametrize("name", KERNELS)
def test_a_task_a_cell_created_runs_between_cells_printing_to_its_cell(specs, name):
    """Before: the task never ran until a cell awaited (it had not ticked a second later).
    What it prints, while a later cell runs or after, is parented to the cell that made it, as
    ipykernel 7 parents it (the ipykernel peers' suite, test_print_to_correct_cell_from_asyncio,
    is the control); Debian's ipykernel 6, this file's control, gives it to the last cell."""
    # A kernel of its own: Debian's ipykernel 6, the control, sometimes ran no task between
    # cells after this module's earlier tests had used its kernel (CI, twice).
    with started(specs[0], name) as (_, kc):
        made = kc.execute(TICKER)
        # Debian's ipykernel 6, the control, once gave this text no parent of this cell under load:
        # its parenting is not what is compared here, belljar's is.
        assert wait_for_stream(kc, made if name == "belljar" else None, "ticked 3 times",
                               timeout=TIMEOUT) is not None
        reply, outputs = execute(kc, "print(ticks >= 3, asyncio.get_event_loop() is ticker.get_loop())\n"
                                     "async def running(): return asyncio.get_running_loop()\n"
                                     "print((await running()) is ticker.get_loop())")
        assert reply["content"]["status"] == "ok", stderr_of(outputs)
        assert stdout_of(outputs) == "True True\nTrue\n"  # one loop: get_event_loop() and await
        woken = kc.execute("wake.set()")
        assert wait_for_stream(kc, made if name == "belljar" else woken, "spoke",
                               timeout=20) == "spoke\n"  # after that cell ended
        reply, outputs = execute(kc, "ticker.cancel(); speaker.cancel()")
        assert reply["content"]["status"] == "ok", stderr_of(outputs)


NAMED_THREAD = """
import threading
from IPython.display import display
parent = get_ipython().get_parent()
go_on, went_on = threading.Event(), threading.Event()
def later():
    token = get_ipython().set_thread_parent(parent)
    print('in A', flush=True)
    go_on.wait(20)
    print('still A', flush=True)
    display('shown in A')
    get_ipython().reset_thread_parent(token)
    print('whoever runs', flush=True)
    went_on.set()
threading.Thread(target=later).start()
"""

ASYNC_A = """
import asyncio
heard = asyncio.Event()
async def answer():
    await heard.wait()
    print('task of A', flush=True)
    display('task display of A')
answering = asyncio.get_event_loop().create_task(answer())
"""


def iopub_until_idle(kc, msg_id):
    """Every iopub message, whatever its parent, until request msg_id's idle (the kernel
    publishes in the order it handles the worker's frames: all a cell's frames caused comes
    before its idle)."""
    seen = []
    while True:
        msg = kc.get_iopub_msg(timeout=TIMEOUT)
        if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"):
            return seen
        seen.append(msg)


def shown_under(messages):
    """(text, parent msg_id) of each stream and display in messages."""
    return [(m["content"].get("text") or m["content"]["data"]["text/plain"],
             m["parent_header"].get("msg_id")) for m in messages
            if m["msg_type"] in ("stream", "display_data")]


@pytest.mark.parametrize("name", ("belljar", "belljar-venv"))
def test_output_goes_to_the_cell_that_started_it(specs, name):
    """As under ipykernel 7 (the ipykernel peers' suite, test_print_to_correct_cell_*, is the
    control): a thread that names its cell (get_ipython().set_thread_parent(get_parent())) and
    a task a cell made print and display under that cell while a later cell runs; once the
    thread lets go, its text goes with the running cell. Before, all of it went to whichever
    cell ran when it was written."""
    with started(specs[0], name) as (_, kc):
        a = kc.execute(NAMED_THREAD)
        assert wait_for_stream(kc, a, "in A") == "in A\n"
        b = kc.execute("go_on.set()\nwent_on.wait(20)")
        assert shown_under(iopub_until_idle(kc, b)) == [
            ("still A\n", a), ("'shown in A'", a), ("whoever runs\n", b)]

        made = kc.execute(ASYNC_A)
        collect(kc, made)
        c = kc.execute("heard.set()\nawait answering\nprint('cell C')")
        assert shown_under(iopub_until_idle(kc, c)) == [
            ("task of A\n", made), ("'task display of A'", made), ("cell C\n", c)]


def test_the_worker_names_only_requests_it_was_given(belljar_kernel):
    """belljar only. A parent the worker names is looked up among the requests it was given:
    output naming one it never saw goes where output naming none goes (the running cell), so
    the worker places nothing itself; a stream of another name is dropped; an earlier cell's
    msg_id gets the output under that cell."""
    _, kc = belljar_kernel
    first = kc.execute("print('first')")
    collect(kc, first)
    forging = kc.execute(textwrap.dedent(f"""\
        import belljar_worker.current as c
        send = c.session.channel.send
        send({{'type': 'stream', 'name': 'stdout', 'text': 'forged', 'parent': 'never-sent'}})
        send({{'type': 'display', 'data': {{'text/plain': 'forged'}}, 'metadata': {{}},
               'transient': {{}}, 'parent': 'never-sent'}})
        send({{'type': 'stream', 'name': 'stdin', 'text': 'forged', 'parent': {first!r}}})
        send({{'type': 'stream', 'name': 'stdout', 'text': 'late', 'parent': {first!r}}})
        print('sent')
    """))
    assert shown_under(iopub_until_idle(kc, forging)) == [
        ("forged", forging), ("forged", forging), ("late", first), ("sent\n", forging)]
    reply, outputs = execute(kc, "print('still serving')")
    assert stdout_of(outputs) == "still serving\n"


@pytest.mark.parametrize("name", KERNELS)
def test_gui_asyncio_is_accepted_and_a_toolkits_loop_refused(specs, name):
    """`%gui asyncio` (ipykernel accepts it) is what belljar does anyway; before, it printed
    "belljar has no GUI event loop". A toolkit's loop is refused, saying why."""
    # A kernel of its own: right after an earlier test's error, Debian's ipykernel 6 (the
    # control) aborted this cell, sent within its stop-on-error window (CI, as nobody).
    with started(specs[0], name) as (_, kc):
        reply, outputs = execute(kc, "%gui asyncio")
        assert reply["content"]["status"] == "ok", outputs
        assert outputs[-1]["msg_type"] == "execute_input", outputs
        reply, outputs = execute(kc, "%gui qt")
        assert reply["content"]["status"] == "ok" and "ERROR" in stderr_of(outputs)
        if name == "belljar":
            assert "belljar runs no GUI toolkit's event loop (%gui qt)" in stderr_of(outputs)
            assert "%gui asyncio is supported" in stderr_of(outputs)


def test_a_widget_moved_by_a_task_reaches_the_client(kernel):
    """ipywidgets' messages from async code between cells (a progress bar, a slider driven by a
    task) reach the page as comm messages, parented to the last cell."""
    _, kc = kernel
    cell = kc.execute("import asyncio, ipywidgets\n"
                      "slider = ipywidgets.IntSlider(value=0)\n"
                      "async def slide():\n"
                      "    for value in range(1, 6):\n"
                      "        await asyncio.sleep(0.01)\n"
                      "        slider.value = value\n"
                      "sliding = asyncio.get_event_loop().create_task(slide())")
    moved = wait_for_iopub(kc, lambda m: m["msg_type"] == "comm_msg"
                           and m["content"]["data"].get("state", {}).get("value") == 5, timeout=20)
    assert moved is not None, "the task's last move never reached the client"
    assert moved["parent_header"]["msg_id"] == cell


FLOOD = """
import asyncio
async def flood():
    n = 0
    while True:
        n += 1
        print('x' * 1000, n)
        if n % 50 == 0:
            display('frame %d' % n)
        await asyncio.sleep(0)
flooding = asyncio.get_event_loop().create_task(flood())
"""

WITHHELD = "output of code running between cells was withheld"


@pytest.fixture
def bounded_kernel():
    with running_kernel(flags=["--timeout", "30", "--output-limit", "256K"]) as (km, kc):
        yield km, kc


def test_a_task_flooding_output_between_cells_is_bounded_and_the_kernel_serves_on(bounded_kernel):
    """belljar only: the worker is the attacker. Output between cells has a budget of its own
    (--output-limit a minute, then one notice), and frames are served between the loop's
    iterations, so a task printing as fast as it can starves neither the client nor a cell."""
    _, kc = bounded_kernel
    cell = kc.execute(FLOOD)
    notice = wait_for_stream(kc, cell, WITHHELD, timeout=30)
    assert notice is not None and "past the output limit of 256.0 KiB a minute" in notice
    asked = kc.kernel_info()
    answer = kc.get_shell_msg(timeout=TIMEOUT)
    while answer["parent_header"].get("msg_id") != asked:
        answer = kc.get_shell_msg(timeout=TIMEOUT)
    assert answer["msg_type"] == "kernel_info_reply"
    # Everything shown between cells so far, up to a cell that ran on the flooded worker.
    msg_id = kc.execute("print('served', flooding.done())")
    idle_bytes, reply = 0, None
    deadline = time.monotonic() + TIMEOUT
    while True:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        parent = msg["parent_header"].get("msg_id")
        if parent == cell and msg["msg_type"] in ("stream", "display_data"):
            idle_bytes += len(json.dumps(msg["content"]))
        if parent == msg_id and msg["msg_type"] == "stream" and "served" in msg["content"]["text"]:
            reply = msg["content"]["text"]
        if parent == msg_id and msg["msg_type"] == "status" \
                and msg["content"]["execution_state"] == "idle":
            break
    assert reply is not None and "served False" in reply
    assert idle_bytes <= 256 * 1024 + 4096, idle_bytes  # the budget, the notice and framing
    reply, outputs = execute(kc, "flooding.cancel()")
    assert reply["content"]["status"] == "ok", stderr_of(outputs)


HOG = """
async def hog():
    print('hogging', flush=True)
    while True:  # never awaits: the loop, and the worker, are held
        pass
hogger = asyncio.get_event_loop().create_task(hog())
"""


def test_an_interrupt_reaches_a_task_that_holds_the_worker_between_cells(bounded_kernel):
    """belljar only. An interrupt while idle stops nothing and keeps the tasks; a task that never
    awaits holds the worker like a cell that never ends, and the interrupt that the next cell
    gets (the user's, or its limit's) ends that task: the cell then runs, the session kept."""
    km, kc = bounded_kernel
    started = kc.execute(TICKER)
    assert wait_for_stream(kc, started, "ticked 3 times", timeout=20) is not None
    # Idle: nothing to interrupt, the ticker ticks on. Sent on this client's control channel
    # and answered before the next cell is sent: km.interrupt_kernel() sends it on the
    # manager's own control socket, which a later request on another connection may overtake
    # (CI once saw it reach the next cell that way).
    interrupt_and_wait(kc)
    reply, outputs = execute(kc, "before = ticks\nawait asyncio.sleep(0.1)\nprint(ticks > before)")
    assert stdout_of(outputs) == "True\n", (reply["content"], stderr_of(outputs))
    hogging = kc.execute(HOG)
    assert wait_for_stream(kc, hogging, "hogging", timeout=20) is not None
    msg_id = kc.execute("print('ran', type(hogger.exception()).__name__)")
    shell_read_fence(kc)  # the kernel holds the request: the worker, inside the hog, has not
    km.interrupt_kernel()
    reply, outputs = collect(kc, msg_id)
    assert reply["content"]["status"] == "ok", (reply["content"], stderr_of(outputs))
    assert stdout_of(outputs) == "ran KeyboardInterrupt\n"
    reply, outputs = execute(kc, "before = ticks\nawait asyncio.sleep(0.1)\n"
                                 "print(ticks > before, hogger.done())")
    assert stdout_of(outputs) == "True True\n", (reply["content"], stderr_of(outputs))


# Comm messages while a cell runs (as ipykernel 7 serves them; Debian's ipykernel 6 queues them
# behind the cell, so these run on belljar alone; the ipykernel peers' suite is the control:
# test_async_cell_waiting_for_comm_reply).

AWAITS_AN_ANSWER = """
import asyncio, comm
answer = asyncio.get_running_loop().create_future()
asking = comm.create_comm(target_name='comm-reply-test')
def answered(msg):
    print('handler got', msg['content']['data']['value'])
    answer.set_result(msg['content']['data']['value'])
asking.on_msg(answered)
result = await asyncio.wait_for(answer, 20)
print('cell got', result)
"""


def opened_by(kc, cell):
    """The comm_id of the comm the cell opened (its comm_open on iopub)."""
    opened = wait_for_iopub(kc, lambda m: m["msg_type"] == "comm_open"
                            and m["parent_header"].get("msg_id") == cell)
    assert opened is not None, "the cell opened no comm"
    return opened["content"]["comm_id"]


def until_idle(kc, msg_ids, timeout=TIMEOUT):
    """The iopub messages, whatever their parent, until each of msg_ids has said idle; and the
    shell replies to those of msg_ids that are requests, in the order they came."""
    messages, waiting = [], set(msg_ids)
    deadline = time.monotonic() + timeout
    while waiting:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            waiting.discard(msg["parent_header"].get("msg_id"))
    replies = []
    while True:
        try:
            reply = kc.get_shell_msg(timeout=0.5 if replies else TIMEOUT)
        except Exception:  # queue.Empty: every reply is in
            return messages, replies
        if reply["parent_header"].get("msg_id") in msg_ids:
            replies.append(reply)


def text_for(messages, parent, name="stdout"):
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream"
                   and m["content"]["name"] == name
                   and m["parent_header"].get("msg_id") == parent)


def statuses_for(messages, parent):
    return [m["content"]["execution_state"] for m in messages
            if m["msg_type"] == "status" and m["parent_header"].get("msg_id") == parent]


def test_a_cell_awaiting_a_widgets_answer_gets_it_while_the_cells_queued_behind_wait(belljar_kernel):
    """The frontend sends the next cell, then the widget's answer: the answer reaches its handler
    while the first cell awaits it (before: it was queued behind both cells, and the first one
    timed out), and the next cell runs after. The handler's output is parented to the comm
    message, as ipykernel's; it has no busy/idle of its own (it ran inside the cell's)."""
    _, kc = belljar_kernel
    cell = kc.execute(AWAITS_AN_ANSWER)
    comm_id = opened_by(kc, cell)
    queued = kc.execute("print('queued saw', result)")
    answer = send_comm(kc, "comm_msg", {"comm_id": comm_id, "data": {"value": 42}})
    messages, replies = until_idle(kc, [cell, queued])
    assert [r["parent_header"]["msg_id"] for r in replies] == [cell, queued]
    assert [r["content"]["status"] for r in replies] == ["ok", "ok"], (
        replies[0]["content"], text_for(messages, cell, "stderr"))
    assert text_for(messages, cell) == "cell got 42\n"
    assert text_for(messages, answer) == "handler got 42\n"
    assert statuses_for(messages, answer) == []
    assert text_for(messages, queued) == "queued saw 42\n"


COUNTS_THEN_AWAITS = """
import asyncio, comm
seen = []
all_in = asyncio.get_running_loop().create_future()
def count(msg):
    seen.append(msg['content']['data']['n'])
    print('handled', msg['content']['data']['n'])
    if len(seen) == 3:
        all_in.set_result(None)
counter = comm.create_comm(target_name='counted')
counter.on_msg(count)
input('go on?')
print('sync part saw', seen)
await asyncio.wait_for(all_in, 20)
print('after await', seen)
"""


def sent_while_at_prompt(kc, code, queued_code):
    """Runs code up to its input() prompt, then sends the queued cell and three comm messages
    to the comm it opened, waits until the kernel has read them (the worker, at the prompt, has
    been handed what it is given), and answers the prompt. Returns the ids."""
    cell = kc.execute(code, allow_stdin=True)
    comm_id = opened_by(kc, cell)
    prompt = kc.get_stdin_msg(timeout=TIMEOUT)
    assert prompt["parent_header"]["msg_id"] == cell
    queued = kc.execute(queued_code)
    sent = [send_comm(kc, "comm_msg", {"comm_id": comm_id, "data": {"n": n}}) for n in (1, 2, 3)]
    shell_read_fence(kc)
    kc.input("yes")
    return cell, queued, sent


def test_a_cell_sees_comm_messages_only_once_it_awaits_each_once_in_order(belljar_kernel):
    """Comm messages that arrive while the cell runs its sync code (here, waiting at a prompt)
    wait: nothing runs a handler in the middle of a cell's bytecode. At its await they are
    handled, one after the other, in order, once each; the cell queued behind it runs after."""
    _, kc = belljar_kernel
    cell, queued, sent = sent_while_at_prompt(kc, COUNTS_THEN_AWAITS, "print('queued saw', seen)")
    messages, replies = until_idle(kc, [cell, queued])
    assert [r["content"]["status"] for r in replies] == ["ok", "ok"], (
        replies[0]["content"], text_for(messages, cell, "stderr"))
    assert text_for(messages, cell) == "sync part saw []\nafter await [1, 2, 3]\n"
    assert [text_for(messages, msg_id) for msg_id in sent] == [
        "handled 1\n", "handled 2\n", "handled 3\n"]
    assert text_for(messages, queued) == "queued saw [1, 2, 3]\n"


COUNTS_AND_ENDS = """
import comm
seen = []
def count(msg):
    seen.append(msg['content']['data']['n'])
    print('handled', msg['content']['data']['n'])
counter = comm.create_comm(target_name='counted')
counter.on_msg(count)
input('go on?')
print('cell saw', seen)
"""


def test_comm_messages_a_cell_ended_without_awaiting_are_handled_once_in_order_before_the_next_cell(
        belljar_kernel):
    """The cell never awaits: the comm messages that came during it are handled after it, each
    once, in order, before the cell the client had queued ahead of them (before: after it, as
    they were queued), each with its own busy and idle, as any comm message handled by itself."""
    _, kc = belljar_kernel
    cell, queued, sent = sent_while_at_prompt(kc, COUNTS_AND_ENDS, "print('queued saw', seen)")
    messages, replies = until_idle(kc, [cell, queued, *sent])
    assert [r["content"]["status"] for r in replies] == ["ok", "ok"]
    assert text_for(messages, cell) == "cell saw []\n"
    assert [text_for(messages, msg_id) for msg_id in sent] == [
        "handled 1\n", "handled 2\n", "handled 3\n"]
    assert [statuses_for(messages, msg_id) for msg_id in sent] == [["busy", "idle"]] * 3
    assert text_for(messages, queued) == "queued saw [1, 2, 3]\n"


FORGES_AROUND_ITS_HANDLER = """
import asyncio, comm
from belljar_worker import current
channel = current.session.channel
channel.send({'type': 'comm_begin'})  # the cell's own id: no comm message was handed
channel.send({'type': 'comm_begin', 'id': 'r999999'})
answer = asyncio.get_running_loop().create_future()
asking = comm.create_comm(target_name='forger')
def answered(msg):
    channel.send({'type': 'comm_begin'})  # a second one
    channel.send({'type': 'error', 'ename': 'Forged', 'evalue': 'by the handler', 'traceback': []})
    channel.send({'type': 'result', 'data': {'text/plain': 'forged result'}, 'metadata': {}})
    channel.send({'type': 'done', 'id': 'r999999', 'status': 'error'})
    answer.set_result(msg['content']['data']['value'])
asking.on_msg(answered)
got = await asyncio.wait_for(answer, 20)
print('cell got', got)
"""


def test_a_worker_forging_frames_around_a_comm_handler_changes_nothing(belljar_kernel):
    """belljar only: the worker is the attacker. A comm_begin for no comm message handed, or a
    second one, and a handler's error, result or done for another id are dropped: the cell
    ends as it would have, nothing forged is shown, and the next comm message is served."""
    _, kc = belljar_kernel
    cell = kc.execute(FORGES_AROUND_ITS_HANDLER)
    comm_id = opened_by(kc, cell)
    answer = send_comm(kc, "comm_msg", {"comm_id": comm_id, "data": {"value": 7}})
    messages, replies = until_idle(kc, [cell])
    assert replies[0]["content"]["status"] == "ok", text_for(messages, cell, "stderr")
    assert text_for(messages, cell) == "cell got 7\n"
    assert not [m for m in messages if m["msg_type"] in ("error", "execute_result")]
    assert text_for(messages, answer) == ""
    reply, outputs = execute(kc, AWAITS_AN_ANSWER.replace("20)", "0.001)").replace(
        "result = await", "try:\n    result = await").replace(
        "print('cell got', result)", "except asyncio.TimeoutError:\n    print('no answer')"))
    assert stdout_of(outputs) == "no answer\n", (reply["content"], stderr_of(outputs))
