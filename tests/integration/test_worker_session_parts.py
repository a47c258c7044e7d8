"""The parts the worker's Session wires (worker/belljar_worker/), each driven alone, without a
sandbox or a worker process: the IPython shell (shell.py) with a stand-in of the session it
serves, the history in a namespace (history.py), where output frames go (output_frames.py), the
execute_reply payload (payloads.py), input() forwarded (stdin.py), the answer a request gets
when the worker itself failed (fallback_replies.py). The session's own end to end behaviour is
test_worker_protocol.py's; these say which part broke.

The stand-ins are of the session's own small interfaces (a channel's send and wait_for, the
session the shell calls), never of a library: IPython, traitlets and the output parents are the
real ones.
"""
import os
import sys
import threading
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("BELLJAR_SOURCE") or Path(__file__).resolve().parents[2])
sys.path.insert(0, str(SOURCE / "worker"))

from belljar_worker import output_parents  # noqa: E402
from belljar_worker.history import History  # noqa: E402


class Channel:
    """The frame channel as the parts use it: frames sent, replies waited for."""

    def __init__(self, replies=()):
        self.sent = []
        self.replies = list(replies)
        self.main_thread = threading.get_ident()

    def send(self, frame, strict=False):
        self.sent.append(frame)

    def wait_for(self, kind):
        reply = self.replies.pop(0)
        assert reply.pop("type") == kind
        return reply


# -- history.py -------------------------------------------------------------------------------

def test_history_names_inputs_as_ipython_does():
    ns = {}
    history = History(ns)
    assert ns["In"] is ns["_ih"] is history.In and ns["Out"] is ns["_oh"] is history.Out
    history.store_input(1, "a = 1", "a = 1")
    history.store_input(2, "b = 2", "b  =  2")
    assert history.In == ["", "a = 1", "b = 2"]
    # While cell 2 runs, _i is cell 1's input and _i2 is what the user typed for cell 2.
    assert (ns["_i"], ns["_ii"], ns["_i1"], ns["_i2"]) == ("a = 1", "", "a = 1", "b  =  2")
    history.store_input(5, "c", "c")
    assert history.In == ["", "a = 1", "b = 2", "", "", "c"]
    history.store_input(None, "unstored", "unstored")
    assert "unstored" not in history.In and ns["_i"] == "b  =  2"


def test_history_moves_values_down_and_leaves_a_users_underscore_alone():
    ns = {}
    history = History(ns)
    history.store_output(1, "one")
    history.store_output(2, "two")
    assert (ns["_"], ns["__"], ns["___"], ns["_1"], ns["_2"]) == ("two", "one", "", "one", "two")
    assert history.Out == {1: "one", 2: "two"}
    ns["_"] = "mine"
    history.store_output(3, "three")
    assert (ns["_"], ns["__"], ns["_3"], history.Out[3]) == ("mine", "one", "three", "three")


# -- shell.py and ipython_bridge.create_shell -------------------------------------------------

class ShellSession:
    """What the shell may ask of the session, recorded."""

    def __init__(self):
        from belljar_worker.runner import CellRunner
        self.calls = []
        self.main_module = type(sys)("__main__")
        self.namespace = self.main_module.__dict__
        self.history = History(self.namespace)
        self.namespace.update(exit="session's exit")
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
    assert ns["In"] is session.history.In and ns["_ih"] is ns["In"] and ns["_oh"] is ns["Out"]
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


def test_ipythons_cell_events_fire_around_a_cell_with_its_count():
    pytest.importorskip("IPython")
    from belljar_worker.ipython_bridge import create_shell
    from belljar_worker.session import CellContext
    shell = create_shell(ShellSession()) if _shell_instance() is None else _shell_instance()
    seen = []
    callbacks = {"pre_execute": lambda: seen.append("pre_execute"),
                 "pre_run_cell": lambda info: seen.append(("pre_run_cell", info.raw_cell)),
                 "post_execute": lambda: seen.append("post_execute"),
                 "post_run_cell": lambda result: seen.append(
                     ("post_run_cell", type(result.error_in_exec).__name__))}
    for event, callback in callbacks.items():
        shell.events.register(event, callback)
    try:
        cell = CellContext({"id": "c", "code": "x = 1", "execution_count": 7})
        shell.cell_event(cell, "pre")
        assert shell.execution_count == 7
        sys.last_value, cell.failed = ValueError("v"), True
        shell.cell_event(cell, "post")
        silent = CellContext({"id": "s", "code": "y", "silent": True})
        shell.cell_event(silent, "pre")
    finally:
        for event, callback in callbacks.items():
            shell.events.unregister(event, callback)
    assert seen == ["pre_execute", ("pre_run_cell", "x = 1"), "post_execute",
                    ("post_run_cell", "ValueError"), "pre_execute"]


def _shell_instance():
    from belljar_worker.shell import BelljarShell
    return BelljarShell.instance() if BelljarShell.initialized() else None


# -- limits.py and audit.py: what the supervisor decides --------------------------------------

def test_limits_are_asked_and_the_supervisors_refusal_is_the_cells_error():
    from belljar_worker.limits import LimitError, negotiate_limits
    channel = Channel([{"type": "limits_reply", "ok": True},
                       {"type": "limits_reply", "ok": False, "error": "over --memory"},
                       {"type": "limits_reply"}])
    negotiate_limits(channel, "c1", {"timeout": "2", "memory": "1G"})
    assert channel.sent == [{"type": "limits", "id": "c1", "timeout": "2", "memory": "1G"}]
    with pytest.raises(LimitError, match="over --memory"):
        negotiate_limits(channel, "c2", {"cpu": "1"})
    with pytest.raises(LimitError, match="refused"):
        negotiate_limits(channel, "c3", {"cpu": "1"})


def test_the_audit_shows_the_supervisors_records_and_nothing_of_a_malformed_reply():
    from belljar_worker.audit import show_audit
    channel = Channel([{"type": "audit_reply", "records": [{"execution_count": 4,
                                                            "status": "ok"}]},
                       {"type": "audit_reply", "records": "not a list"}])
    show_audit(channel, "a1", 3)
    show_audit(channel, "a2", 1)
    assert channel.sent[0] == {"type": "audit_request", "id": "a1", "last": 3}
    table = channel.sent[1]
    assert table["type"] == "display" and "4" in table["data"]["text/plain"]
    assert channel.sent[2] == {"type": "audit_request", "id": "a2", "last": 1}
    assert "4" not in channel.sent[3]["data"]["text/plain"]


# -- output_frames.py -------------------------------------------------------------------------

def test_displays_go_to_the_request_being_served_unless_a_context_names_another():
    from belljar_worker.output_frames import OutputFrames
    channel = Channel()
    output = OutputFrames(channel, streams=None)
    output.parents.serve("cell-1")
    try:
        output.publish_display({"text/plain": "x"}, None, None, False)
        output.publish_display({"text/plain": "y"}, {"m": 1}, {"display_id": "d"}, True)
        output.clear_output(wait=1)
        token = output.parents.name({"header": {"msg_id": "cell-0"}})
        output.clear_output()
        output.parents.unname(token)
    finally:
        output.parents.served()
    assert channel.sent == [
        {"type": "display", "data": {"text/plain": "x"}, "metadata": {}, "transient": {}},
        {"type": "update_display", "data": {"text/plain": "y"}, "metadata": {"m": 1},
         "transient": {"display_id": "d"}},
        {"type": "clear_output", "wait": True},
        {"type": "clear_output", "wait": False, "parent": "cell-0"}]


def test_a_threads_display_names_the_request_it_was_made_in():
    from belljar_worker.output_frames import OutputFrames
    channel = Channel()
    output = OutputFrames(channel, streams=None)
    output.parents.serve("cell-2")
    try:
        thread = threading.Thread(target=output.clear_output)
        thread.start()
        thread.join()
    finally:
        output.parents.served()
    assert channel.sent == [{"type": "clear_output", "wait": False, "parent": "cell-2"}]


def test_a_widget_view_gets_the_text_a_frontend_without_widgets_shows():
    from belljar_worker.formatting import WIDGET_VIEW
    from belljar_worker.output_frames import OutputFrames
    channel = Channel()
    view = {"model_id": "m1", "version_major": 2, "version_minor": 0}
    OutputFrames(channel, streams=None).publish_display({WIDGET_VIEW: view}, {}, {}, False)
    data = channel.sent[0]["data"]
    assert data[WIDGET_VIEW] == view and data["text/plain"]


# -- payloads.py ------------------------------------------------------------------------------

class PayloadManager:
    """IPython's payload manager as the shell has it: written, read, cleared."""

    def __init__(self):
        self.items = []

    def write_payload(self, item):
        self.items.append(item)

    def read_payload(self):
        return self.items

    def clear_payload(self):
        self.items = []


def test_a_cells_payload_is_its_own_then_ipythons_and_is_taken_once():
    from belljar_worker.payloads import Payloads
    shell = None
    payloads = Payloads(lambda: shell)
    payloads.write({"source": "ask_exit"})
    shell = type("Shell", (), {"payload_manager": PayloadManager()})()
    payloads.write({"source": "set_next_input", "text": "x"})
    assert shell.payload_manager.items == [{"source": "set_next_input", "text": "x"}]
    assert payloads.take() == [{"source": "ask_exit"}, {"source": "set_next_input", "text": "x"}]
    assert payloads.take() == [] and shell.payload_manager.items == []


# -- stdin.py: InputRequests ------------------------------------------------------------------

class Cell:
    def __init__(self, allow_stdin):
        self.allow_stdin = allow_stdin


def test_only_a_cell_that_allows_stdin_may_ask_from_its_own_thread():
    from belljar_worker.stdin import InputRequests
    requests = InputRequests(Channel())
    assert requests.allowed(Cell(True))
    assert not requests.allowed(Cell(False))
    assert not requests.allowed(None)  # between requests, or a comm handler's
    seen = []
    thread = threading.Thread(target=lambda: seen.append(requests.allowed(Cell(True))))
    thread.start()
    thread.join()
    assert seen == [False]  # a second reader on fd 3 would steal the cell's frames


def test_the_frontends_answer_is_the_value_and_ctrl_d_or_an_error_is_eof():
    from belljar_worker.stdin import InputRequests
    channel = Channel([{"type": "input_reply", "value": "42"},
                       {"type": "input_reply", "value": 7},
                       {"type": "input_reply", "value": "\x04"},
                       {"type": "input_reply", "error": "no frontend"}])
    requests = InputRequests(channel)
    assert requests.request("n? ", False) == "42"
    assert requests.request("", True) == "7"
    with pytest.raises(EOFError, match="EOF when reading a line"):
        requests.request("", False)
    with pytest.raises(EOFError, match="no frontend"):
        requests.request("", False)
    assert channel.sent[0] == {"type": "input_request", "prompt": "n? ", "password": False}
    assert channel.sent[1]["password"] is True


def test_an_interrupt_while_asking_is_the_users():
    from belljar_worker.stdin import InputRequests

    class Interrupted(Channel):
        def wait_for(self, kind):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt, match="Interrupted by user"):
        InputRequests(Interrupted()).request("", False)


# -- fallback_replies.py ----------------------------------------------------------------------

@pytest.mark.parametrize("kind,reply", [
    ("complete", {"type": "complete_reply", "id": "r", "matches": [], "cursor_start": 3,
                  "cursor_end": 3, "metadata": {}}),
    ("inspect", {"type": "inspect_reply", "id": "r", "found": False, "data": {},
                 "metadata": {}}),
    ("is_complete", {"type": "is_complete_reply", "id": "r", "status": "unknown",
                     "indent": ""}),
    ("comm", {"type": "done", "id": "r", "status": "error"}),
    ("comm_info", {"type": "comm_info_reply", "id": "r", "comms": {}}),
])
def test_a_request_the_worker_failed_is_answered_empty(kind, reply):
    from belljar_worker.fallback_replies import fallback_frames
    msg = {"type": kind, "id": "r", "cursor_pos": 3}
    assert fallback_frames(msg, RuntimeError("ours")) == [reply]


def test_an_execute_the_worker_failed_ends_in_its_error_and_done():
    from belljar_worker.fallback_replies import fallback_frames
    error, done = fallback_frames({"type": "execute", "id": "c1"}, KeyboardInterrupt())
    assert error["type"] == "error" and error["ename"] == "KeyboardInterrupt"
    assert done == {"type": "done", "id": "c1", "status": "error", "user_expressions": {},
                    "payload": []}


def test_every_request_the_session_serves_has_a_fallback_and_nothing_else_does():
    from belljar_worker.fallback_replies import FALLBACKS, fallback_frames
    assert set(FALLBACKS) == {"execute", "complete", "inspect", "is_complete", "comm",
                              "comm_info"}
    assert fallback_frames({"type": "input_reply", "id": "r"}, RuntimeError()) == []


# -- comm_requests.py -------------------------------------------------------------------------

class Gate:
    """The interrupt gate as the parts use it: whether user code may be interrupted."""

    def __init__(self):
        self.in_user_code = False

    def enter_user_code(self):
        self.in_user_code = True

    def leave_user_code(self):
        self.in_user_code = False


class Streams:
    def __init__(self):
        import io
        self.stderr = io.StringIO()
        self.flushes = 0

    def reopen_if_closed(self):
        pass

    def flush(self):
        self.flushes += 1


class CommChannel(Channel):
    def __init__(self, handed=()):
        super().__init__()
        self.request_id = None
        self.handed = list(handed)

    def take_comms(self, cell_id):
        assert cell_id == "cell"
        handed, self.handed = self.handed, []
        return handed


class CommSession:
    """What CommRequests may touch of the session, recorded."""

    def __init__(self):
        self.post_cell_hooks = []
        self.ctx, self.parent_msg_id = "the cell's context", "cell-msg"
        self.recovered, self.handler_errors = [], []
        self.errors = None

    def report_handler_error(self, exc):
        self.handler_errors.append(exc)
        if self.errors is not None:
            self.errors.handler_raised(exc)

    def recover(self, msg, exc):
        self.recovered.append((msg["id"], type(exc).__name__))


def comm_requests(serve, handed=()):
    from belljar_worker.comm_requests import CommRequests
    channel, gate, streams, session = CommChannel(handed), Gate(), Streams(), CommSession()
    return CommRequests(channel, gate, streams, session, serve=serve), channel, gate, session


def test_a_comm_request_is_served_in_user_code_and_ends_in_done():
    seen = []
    requests, channel, gate, session = comm_requests(
        lambda msg: seen.append((msg["id"], gate.in_user_code, requests.serving)))
    session.post_cell_hooks.append(lambda: seen.append("figures"))
    requests.serve({"type": "comm", "id": "c1"})
    assert seen == [("c1", True, True), "figures"]
    assert channel.sent == [{"type": "done", "id": "c1", "status": "ok"}]
    assert not gate.in_user_code and not requests.serving


def test_a_failed_handler_fails_its_request_with_its_traceback_on_stderr():
    requests, channel, gate, session = comm_requests(
        lambda msg: requests.handler_failed(["Traceback", "ValueError: no"]))
    session.post_cell_hooks.append(lambda: 1 / 0)  # a hook's error is the handler's
    requests.serve({"type": "comm", "id": "c2"})
    assert channel.sent == [{"type": "done", "id": "c2", "status": "error"}]
    assert requests._streams.stderr.getvalue() == "Traceback\nValueError: no\n"
    assert [type(e) for e in session.handler_errors] == [ZeroDivisionError]


def test_comms_during_a_cell_set_the_cell_aside_and_put_it_back():
    seen = []

    def serve(msg):
        seen.append((msg["id"], channel.request_id, session.ctx, session.parent_msg_id))

    requests, channel, gate, session = comm_requests(
        serve, handed=[{"type": "comm", "id": "h1", "msg_id": "m1"},
                       {"type": "comm", "id": "h2", "msg_id": 7}])
    channel.request_id = "cell"
    gate.enter_user_code()
    session.post_cell_hooks.append(lambda: seen.append("the cell's figures"))
    requests.serve_during_cell("cell")
    assert seen == [("h1", "h1", None, "m1"), ("h2", "h2", None, "")]  # no figures: the cell's
    assert channel.sent == [{"type": "comm_begin"}, {"type": "done", "id": "h1", "status": "ok"},
                            {"type": "comm_begin"}, {"type": "done", "id": "h2", "status": "ok"}]
    assert (channel.request_id, session.ctx, session.parent_msg_id) == (
        "cell", "the cell's context", "cell-msg")
    assert gate.in_user_code


def test_an_interrupt_in_a_handler_during_a_cell_is_the_cells():
    from belljar_worker.error_reports import ErrorReports

    def serve(msg):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            session.report_handler_error(exc)

    requests, channel, gate, session = comm_requests(
        serve, handed=[{"type": "comm", "id": "h1"}, {"type": "comm", "id": "h2"}])
    session.errors = ErrorReports(channel, {}, lambda: session.ctx, requests)
    channel.request_id = "cell"
    with pytest.raises(KeyboardInterrupt):
        requests.serve_during_cell("cell")
    # h2 waits: the cell takes the interrupt first, and the supervisor hands h2 again.
    assert channel.sent == [{"type": "comm_begin"},
                            {"type": "done", "id": "h1", "status": "error"}]
    assert channel.request_id == "cell"
    assert "KeyboardInterrupt" in requests._streams.stderr.getvalue()


def test_a_handler_that_breaks_the_request_is_recovered_and_its_interrupt_kept():
    def serve(msg):
        raise KeyboardInterrupt  # past the handler: the request itself

    requests, channel, gate, session = comm_requests(serve, handed=[{"type": "comm", "id": "h"}])
    with pytest.raises(KeyboardInterrupt):
        requests.serve_during_cell("cell")
    assert session.recovered == [("h", "KeyboardInterrupt")]
    assert session.ctx == "the cell's context"


def test_comm_info_loads_no_comms_for_a_session_that_never_opened_one():
    requests, channel, _, _ = comm_requests(None)
    loaded = sys.modules.pop("belljar_worker.comms", None)
    try:
        requests.info({"id": "i1", "target_name": "jupyter.widget"})
        assert "belljar_worker.comms" not in sys.modules
    finally:
        if loaded is not None:
            sys.modules["belljar_worker.comms"] = loaded
    assert channel.sent == [{"type": "comm_info_reply", "id": "i1", "comms": {}}]


# -- error_reports.py -------------------------------------------------------------------------

class CellState:
    failed = False


def error_reports(cell=None, serving_comm=False):
    from belljar_worker.comm_requests import CommRequests
    from belljar_worker.error_reports import ErrorReports
    channel, streams = CommChannel(), Streams()
    comms = CommRequests(channel, Gate(), streams, CommSession(), serve=None)
    comms.status = "ok" if serving_comm else None
    return ErrorReports(channel, {}, lambda: cell, comms), channel, comms, streams


def raised(exc_type):
    try:
        raise exc_type("boom")
    except exc_type as exc:
        return exc


def test_a_cells_exception_fails_it_and_is_kept_as_pythons_last():
    cell = CellState()
    errors, channel, _, _ = error_reports(cell)
    exc = raised(ValueError)
    errors.cell_raised(exc)
    assert cell.failed and sys.last_value is exc
    frame = channel.sent[0]
    assert frame["type"] == "error" and frame["ename"] == "ValueError" and frame["evalue"] == "boom"


def test_a_shown_traceback_fails_the_cell_only_while_its_value_is_formatted():
    cell = CellState()
    errors, channel, _, _ = error_reports(cell)
    shown = {"ename": "E", "evalue": "v", "traceback": ["t"]}
    errors.shown(shown)
    assert not cell.failed and channel.sent[-1] == dict(type="error", fails_cell=False, **shown)
    errors.formatting_result = True
    errors.shown(shown)
    assert cell.failed and channel.sent[-1]["fails_cell"] is True


def test_a_repr_that_raised_is_shown_and_the_cell_goes_on():
    cell = CellState()
    errors, channel, _, _ = error_reports(cell)
    errors.format_failed(object(), "_repr_html_", raised(RuntimeError))
    assert not cell.failed
    assert channel.sent[0]["ename"] == "RuntimeError" and channel.sent[0]["fails_cell"] is False


def test_errors_of_a_comm_request_go_to_its_stderr_and_fail_it():
    errors, channel, comms, streams = error_reports(cell=None, serving_comm=True)
    errors.shown({"ename": "E", "evalue": "v", "traceback": ["shown"]})
    errors.handler_raised(raised(KeyError))
    assert channel.sent == [] and comms.status == "error"
    assert streams.stderr.getvalue().startswith("shown\n") and "KeyError" in streams.stderr.getvalue()


def test_a_handler_a_cell_called_fails_the_cell():
    cell = CellState()
    errors, channel, comms, streams = error_reports(cell, serving_comm=True)
    errors.handler_raised(raised(KeyError))
    assert cell.failed and channel.sent[0]["ename"] == "KeyError" and comms.status == "ok"
    errors, channel, _, _ = error_reports(cell=None, serving_comm=False)  # between requests
    errors.handler_raised(raised(KeyError))
    assert channel.sent[0]["ename"] == "KeyError"
