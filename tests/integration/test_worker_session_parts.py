"""The parts the worker's Session wires (worker/belljar_worker/), each driven alone, without a
sandbox or a worker process: the IPython shell (shell.py) with a stand-in of the session it
serves. The session's own end to end behaviour is test_worker_protocol.py's; these say which
part broke.

The stand-ins are of the session's own small interfaces (the session the shell calls), never of
a library: IPython, traitlets and the output parents are the real ones.
"""
import os
import sys
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("BELLJAR_SOURCE") or Path(__file__).resolve().parents[2])
sys.path.insert(0, str(SOURCE / "worker"))

from belljar_worker import output_parents  # noqa: E402

# -- shell.py and ipython_bridge.create_shell -------------------------------------------------

class ShellSession:
    """What the shell may ask of the session, recorded."""

    def __init__(self):
        from belljar_worker.runner import CellRunner
        self.calls = []
        self.main_module = type(sys)("__main__")
        self.namespace = self.main_module.__dict__
        self.In, self.Out = [""], {}
        self.namespace.update(In=self.In, Out=self.Out, _ih=self.In, _oh=self.Out,
                              exit="session's exit")
        self.SESSION_NAMES = ("In", "Out", "_ih", "_oh", "_", "exit")
        self.cell_labels = {"<cell-1>": "In[1]"}
        self.runner = CellRunner(self.namespace)
        self.parents = output_parents.OutputParents()
        self.streams = self

    def sync_for_direct_output(self):
        self.calls.append(("sync",))

    def publish_display(self, data, metadata, transient, update):
        self.calls.append(("display", data, metadata, transient, update))

    def clear_output(self, wait):
        self.calls.append(("clear", wait))

    def report_error(self, content):
        self.calls.append(("error", content))

    def write_payload(self, item):
        self.calls.append(("payload", item))

    def route_output_by_parent(self):
        self.calls.append(("route",))


@pytest.fixture(scope="module")
def shell_and_session():
    pytest.importorskip("IPython")
    from belljar_worker.ipython_bridge import create_shell
    session = ShellSession()
    shell = create_shell(session)
    yield shell, session
    type(shell).clear_instance()


@pytest.fixture
def shell(shell_and_session):
    shell, session = shell_and_session
    session.calls.clear()
    return shell


def calls(shell):
    return shell.worker_session.calls


def test_the_shell_keeps_the_sessions_names_and_hides_them(shell_and_session):
    shell, session = shell_and_session
    ns = session.namespace
    assert ns["In"] is session.In and ns["_ih"] is ns["In"] and ns["_oh"] is ns["Out"]
    assert ns["exit"] == "session's exit"
    assert "quit" not in ns  # IPython's quit would end the cell with SystemExit
    assert set(shell.user_ns_hidden) >= set(session.SESSION_NAMES)
    assert shell.loop_runner == session.runner.run_coroutine


def test_the_shells_displays_and_clears_are_the_sessions_frames(shell):
    from IPython.display import clear_output, display
    display({"text/plain": "x"}, raw=True, metadata={"m": 1}, transient={"display_id": "d"})
    display({"text/plain": "y"}, raw=True, display_id="d", update=True)
    clear_output(wait=True)
    sent = calls(shell)
    assert sent[0] == ("display", {"text/plain": "x"}, {"m": 1}, {"display_id": "d"}, False)
    assert sent[1][0] == "display" and sent[1][1] == {"text/plain": "y"} and sent[1][4] is True
    assert sent[2] == ("clear", True)


def test_a_value_ipython_shows_itself_is_a_display(shell):
    # IPython's display hook runs where IPython runs a cell itself (%%capture, %run -i).
    shell.displayhook.write_format_data({"text/plain": "3"})
    assert calls(shell)[-1] == ("display", {"text/plain": "3"}, {}, None, False)


def test_tracebacks_and_usage_errors_are_reported_to_the_session(shell):
    shell.run_cell("1/0")
    shell.run_cell("%matplotlib qt")
    errors = [call[1] for call in calls(shell) if call[0] == "error"]
    assert errors[0]["ename"] == "ZeroDivisionError" and len(errors[0]["traceback"]) > 1
    assert errors[1]["ename"] == "UsageError" and "inline only" in errors[1]["evalue"]


def test_a_toolkits_event_loop_is_refused_and_asyncio_is_the_sessions(shell):
    from IPython.core.error import UsageError
    with pytest.raises(UsageError, match="no display"):
        shell.enable_gui("qt")
    assert shell.active_eventloop is None
    shell.enable_gui(None)
    assert shell.active_eventloop is None


def test_next_input_and_exit_are_payloads(shell):
    shell.set_next_input("x = 1", replace=True)
    shell.ask_exit()
    assert calls(shell) == [
        ("payload", {"source": "set_next_input", "text": "x = 1", "replace": True}),
        ("payload", {"source": "ask_exit", "keepkernel": False})]


def test_a_parent_named_in_the_shell_is_the_sessions(shell_and_session):
    shell, session = shell_and_session
    session.parents.serve("cell-1")
    try:
        parent = shell.get_parent()
        assert parent["header"]["msg_id"] == "cell-1"
        token = shell.set_thread_parent(parent)
        assert ("route",) in calls(shell) and session.parents.named
        shell.reset_thread_parent(token)
    finally:
        session.parents.served()


def test_a_shell_command_syncs_the_streams_and_keeps_its_status(shell):
    shell.system("exit 3")
    assert calls(shell) == [("sync",)]
    assert shell.user_ns["_exit_code"] == 3


def test_cells_the_session_compiled_are_named_in_ipythons_tracebacks(shell):
    if getattr(shell.compile, "format_code_name", None) is None:
        pytest.skip("an IPython before 8 names cells itself")
    assert shell.compile.format_code_name("<cell-1>") == ("Cell", "In[1]")
