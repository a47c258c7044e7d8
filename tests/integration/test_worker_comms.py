"""Comms in the belljar worker, spoken over frames the way the supervisor speaks them (issue 14).

The worker is started as the supervisor starts it (the harness of test_worker_protocol.py): the
supervisor's `comm` and `comm_info` requests carry the frontend's comm_open, comm_msg and
comm_close (buffers in base64); the worker answers with `comm_open`, `comm_msg` and `comm_close`
frames stamped with the request's id, and ends every comm request with `done`. Then Debian's
ipywidgets 6 on top: its comms open, a view is displayed, a slider moved by the frontend
updates the Python value, and `interact` re-runs its function with its output captured.
"""
import base64
import json

import pytest
from test_worker_protocol import Worker

# Debian's python3-comm and python3-ipywidgets (6.0.0) come with scripts/install-deps.sh.

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def worker():
    w = Worker()
    yield w
    w.close()


def b64(data):
    return base64.b64encode(data).decode("ascii")


def unb64(frame):
    return [base64.b64decode(b) for b in frame.get("buffers", [])]


def comm_request(worker, msg_type, content, buffers=(), request_id=None, msg_id=None,
                 metadata=None):
    """Send one frontend comm message as the supervisor does; the frames and text it caused,
    up to and including its `done`."""
    request_id = request_id or "cm%d" % len(worker.events)
    frame = {"type": "comm", "id": request_id, "msg_type": msg_type, "content": content,
             "metadata": metadata or {}, "buffers": [b64(b) for b in buffers]}
    if msg_id is not None:
        frame["msg_id"] = msg_id
    worker._seen = len(worker.events)
    worker.send(frame)
    cell = worker.finish_execute()
    assert cell.done == {"type": "done", "id": request_id, "status": cell.done["status"]}
    assert all(f["id"] == request_id for f in cell.frames), cell.frames
    return cell


def comm_info(worker, target_name=None, request_id="ci"):
    msg = {"type": "comm_info", "id": request_id}
    if target_name is not None:
        msg["target_name"] = target_name
    reply = worker.request(msg, "comm_info_reply")
    assert reply["id"] == request_id
    return reply["comms"]


def value_of(worker, expression):
    cell = worker.execute("pass", user_expressions={"v": expression})
    result = cell.done["user_expressions"]["v"]
    assert result["status"] == "ok", result
    return result["data"]["text/plain"]


ECHO_TARGET = """
from comm import get_comm_manager
opened = []
def echo_target(comm, msg):
    opened.append((msg['content']['data'], [type(b).__name__ for b in msg['buffers']],
                   [b.tobytes() for b in msg['buffers']], msg['header']['msg_id']))
    print('opened with', msg['content']['data'])
    def on_msg(m):
        first = m['buffers'][0].tobytes()
        comm.send({'echo': m['content']['data']}, buffers=[first[::-1], b'\\x00\\xff'])
    def on_close(m):
        print('closed with', m['content']['data'])
    comm.on_msg(on_msg)
    comm.on_close(on_close)
    comm.send({'hello': 1}, buffers=[b'\\x01\\x02\\x03'])
get_comm_manager().register_target('echo', echo_target)
"""


def test_a_target_gets_comm_open_with_data_and_buffers_and_answers_with_buffers(worker):
    assert worker.execute(ECHO_TARGET).ok
    opened = comm_request(worker, "comm_open",
                          {"comm_id": "c-1", "target_name": "echo", "data": {"x": 1}},
                          buffers=[b"\x00\x01binary\xff"], request_id="open-1", msg_id="m-open")
    assert opened.ok and opened.stdout == "opened with {'x': 1}\n"
    [hello] = opened.of_type("comm_msg")
    assert hello["comm_id"] == "c-1" and hello["data"] == {"hello": 1}
    assert unb64(hello) == [b"\x01\x02\x03"]
    # The target saw the data, the buffers as memoryviews (as ipykernel hands them) and the
    # frontend's msg_id.
    assert value_of(worker, "opened") == repr(
        [({"x": 1}, ["memoryview"], [b"\x00\x01binary\xff"], "m-open")])

    echoed = comm_request(worker, "comm_msg", {"comm_id": "c-1", "data": {"n": 2}},
                          buffers=[b"abc\x00"], request_id="msg-1")
    assert echoed.ok
    [reply] = echoed.of_type("comm_msg")
    assert reply["data"] == {"echo": {"n": 2}} and reply["comm_id"] == "c-1"
    assert unb64(reply) == [b"\x00cba", b"\x00\xff"]


def test_comm_info_with_and_without_target_name(worker):
    assert comm_info(worker) == {}  # nothing opened yet (and comms need not be loaded)
    assert worker.execute(ECHO_TARGET).ok
    assert comm_request(worker, "comm_open", {"comm_id": "front-1", "target_name": "echo",
                                              "data": {}}).ok
    cell = worker.execute("from comm import create_comm\n"
                          "mine = create_comm(target_name='kernel.side', data={'a': 1})\n"
                          "mine.comm_id")
    mine = json.loads(cell.result["text/plain"].replace("'", '"'))
    assert comm_info(worker) == {"front-1": {"target_name": "echo"},
                                 mine: {"target_name": "kernel.side"}}
    assert comm_info(worker, "echo") == {"front-1": {"target_name": "echo"}}
    assert comm_info(worker, "kernel.side") == {mine: {"target_name": "kernel.side"}}
    assert comm_info(worker, "no.such.target") == {}
    worker.execute("mine.close()")
    assert comm_info(worker) == {"front-1": {"target_name": "echo"}}


def test_frontend_comm_close_runs_on_close_and_forgets_the_comm(worker):
    assert worker.execute(ECHO_TARGET).ok
    assert comm_request(worker, "comm_open", {"comm_id": "c-2", "target_name": "echo",
                                              "data": {}}).ok
    closed = comm_request(worker, "comm_close", {"comm_id": "c-2", "data": {"bye": True}})
    assert closed.ok and closed.stdout == "closed with {'bye': True}\n"
    assert not closed.of_type("comm_close")  # the frontend closed it: nothing to answer
    assert comm_info(worker) == {}
    # A message to the closed comm reaches nothing, and is still answered.
    late = comm_request(worker, "comm_msg", {"comm_id": "c-2", "data": {}}, buffers=[b"x"])
    assert late.ok and late.frames == [late.done] and late.stdout == ""


def test_an_unknown_target_is_answered_with_comm_close(worker):
    cell = comm_request(worker, "comm_open", {"comm_id": "lost", "target_name": "nobody.home",
                                              "data": {"k": 1}}, request_id="open-lost")
    assert cell.ok
    [close] = cell.of_type("comm_close")
    assert close["comm_id"] == "lost" and close["id"] == "open-lost"
    assert [f["type"] for f in cell.frames] == ["comm_close", "done"]
    assert comm_info(worker) == {}


def test_a_handler_that_raises_shows_its_traceback_on_stderr_and_the_request_ends(worker):
    code = ("from comm import get_comm_manager\n"
            "def fragile(comm, msg):\n"
            "    def on_msg(m):\n"
            "        print('before the failure')\n"
            "        raise ValueError('handler broke on %s' % m['content']['data'])\n"
            "    comm.on_msg(on_msg)\n"
            "get_comm_manager().register_target('fragile', fragile)\n"
            "def broken_target(comm, msg):\n"
            "    raise RuntimeError('target refused')\n"
            "get_comm_manager().register_target('broken', broken_target)\n")
    assert worker.execute(code, execution_count=3).ok
    assert comm_request(worker, "comm_open", {"comm_id": "f-1", "target_name": "fragile",
                                              "data": {}}).ok
    cell = comm_request(worker, "comm_msg", {"comm_id": "f-1", "data": {"n": 1}})
    assert cell.done["status"] == "error"
    assert cell.stdout == "before the failure\n"
    stderr = "".join(cell.stderr)
    assert "ValueError" in stderr and "handler broke on {'n': 1}" in stderr
    assert "Cell In[3], line 5" in stderr  # the user's line, not the worker's machinery
    assert "belljar_worker" not in stderr and not cell.of_type("error")
    # A target that raises: traceback on stderr, and the frontend's end is closed.
    cell = comm_request(worker, "comm_open", {"comm_id": "b-1", "target_name": "broken",
                                              "data": {}})
    assert cell.done["status"] == "error" and "RuntimeError: target refused" in _plain(cell.stderr)
    assert [f["comm_id"] for f in cell.of_type("comm_close")] == ["b-1"]
    assert set(comm_info(worker)) == {"f-1"}
    assert worker.execute("1 + 1").result == {"text/plain": "2"}  # the worker serves on


def test_sigint_interrupts_a_hanging_handler_and_the_worker_serves_on(worker):
    code = ("from comm import get_comm_manager\n"
            "def spinning(comm, msg):\n"
            "    def on_msg(m):\n"
            "        print('spinning', flush=True)\n"
            "        while True: pass\n"
            "    comm.on_msg(on_msg)\n"
            "get_comm_manager().register_target('spin', spinning)\n")
    assert worker.execute(code).ok
    assert comm_request(worker, "comm_open", {"comm_id": "s-1", "target_name": "spin"}).ok
    worker._seen = len(worker.events)
    worker.send({"type": "comm", "id": "spin-msg", "msg_type": "comm_msg",
                 "content": {"comm_id": "s-1", "data": {}}})
    worker.wait_for_output("spinning")
    worker.interrupt()
    cell = worker.finish_execute(timeout=10)
    assert cell.done == {"type": "done", "id": "spin-msg", "status": "error"}
    assert "KeyboardInterrupt" in cell.stderr
    assert worker.execute("'alive'").result == {"text/plain": "'alive'"}


def test_what_a_handler_prints_and_displays_is_output_of_its_request(worker):
    code = ("import matplotlib.pyplot as plt\n"
            "from IPython.display import HTML\n"
            "from comm import get_comm_manager\n"
            "def drawing(comm, msg):\n"
            "    def on_msg(m):\n"
            "        print('drawing', m['content']['data']['n'])\n"
            "        display(HTML('<b>%d</b>' % m['content']['data']['n']))\n"
            "        plt.plot(range(m['content']['data']['n']))\n"
            "    comm.on_msg(on_msg)\n"
            "get_comm_manager().register_target('draw', drawing)\n")
    assert worker.execute(code).ok
    assert comm_request(worker, "comm_open", {"comm_id": "d-1", "target_name": "draw"}).ok
    cell = comm_request(worker, "comm_msg", {"comm_id": "d-1", "data": {"n": 3}},
                        request_id="draw-3")
    assert cell.ok and cell.stdout == "drawing 3\n"
    html, figure = cell.of_type("display")
    assert html["data"]["text/html"] == "<b>3</b>" and "image/png" in figure["data"]
    assert [f["id"] for f in cell.frames] == ["draw-3"] * 3


def test_the_worker_opens_sends_and_closes_comms_as_frames(worker):
    cell = worker.execute("from comm import create_comm\n"
                          "c = create_comm(target_name='kernel.side', data={'a': 1},\n"
                          "                metadata={'m': 'x'},\n"
                          "                buffers=[b'xyz', bytearray(b'\\x00')])\n"
                          "c.send({'b': 2}, buffers=[memoryview(b'12345')[1:3]])\n"
                          "c.close({'c': 3})\n"
                          "c.send({'after': 'close'})\n", id="ks-1")
    assert cell.ok, cell.error
    kinds = [f["type"] for f in cell.frames]
    assert kinds == ["comm_open", "comm_msg", "comm_close", "done"], kinds
    opened, sent, closed = cell.frames[:3]
    comm_id = opened["comm_id"]
    assert opened["target_name"] == "kernel.side" and opened["target_module"] is None
    assert opened["data"] == {"a": 1} and opened["metadata"] == {"m": "x"}
    assert unb64(opened) == [b"xyz", b"\x00"]
    assert sent["comm_id"] == comm_id and sent["data"] == {"b": 2} and unb64(sent) == [b"23"]
    assert closed["comm_id"] == comm_id and closed["data"] == {"c": 3}
    assert all(f["id"] == "ks-1" for f in cell.frames)


def test_import_ipywidgets_does_not_import_ipykernel_and_start_up_stays_lean():
    w = Worker(interpreter_flags=("-X", "importtime"))
    try:
        def imported():
            return {line.split("|")[-1].strip() for line in
                    "".join(t for k, t in w.events if k == "stderr").splitlines()
                    if line.startswith("import time:")}
        assert w.execute("x = 1").ok
        assert not imported() & {"belljar_worker.comms", "belljar_worker.ipykernel_stand_in",
                                 "comm", "ipykernel"}  # nothing of comms at start-up
        cell = w.execute("import ipywidgets\nfrom ipykernel.comm import Comm\n"
                         "import ipykernel, ipywidgets.widgets.widget as ww\n"
                         "(ww.Comm is Comm, getattr(ipykernel, 'belljar_stand_in', False),\n"
                         " get_ipython().kernel.comm_manager\n"
                         "     is __import__('comm').get_comm_manager())")
        assert cell.result == {"text/plain": "(True, True, True)"}, (cell.error, cell.stderr)
        heavy = {"zmq", "tornado", "jupyter_client", "ipykernel.kernelbase", "ipykernel.connect",
                 "ipykernel.zmqshell"}
        assert not imported() & heavy
        # The real package's names still resolve, on first use only.
        cell = w.execute("import ipykernel._version\n"
                         "ipykernel.__version__ == ipykernel._version.__version__ != ''")
        assert cell.result == {"text/plain": "True"}, cell.error
        assert not imported() & heavy
    finally:
        w.close()


# -- Debian's ipywidgets 6 --------------------------------------------------------------------


def widget_opens(cell):
    """{_model_name: comm_open frame} of the jupyter.widget comms the cell opened."""
    opens = cell.of_type("comm_open")
    assert all(f["target_name"] == "jupyter.widget" for f in opens), opens
    return {f["data"]["_model_name"]: f for f in opens}


def _plain(text):
    import re
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_a_displayed_slider_opens_its_comms_and_shows_a_widget_view(worker):
    cell = worker.execute("import ipywidgets\nw = ipywidgets.IntSlider(5)\ndisplay(w)")
    assert cell.ok, cell.error
    opens = widget_opens(cell)
    assert set(opens) == {"LayoutModel", "SliderStyleModel", "IntSliderModel"}
    slider = opens["IntSliderModel"]
    assert slider["data"]["value"] == 5
    assert slider["data"]["layout"] == "IPY_MODEL_" + opens["LayoutModel"]["comm_id"]
    [shown] = cell.of_type("display")
    assert shown["data"] == {WIDGET_VIEW: {"model_id": slider["comm_id"]},
                             "text/plain": "IntSlider(value=5)"}
    # ipywidgets 6 also tells the model it is displayed, as under ipykernel.
    assert [f["data"] for f in cell.of_type("comm_msg")] == [{"method": "display"}]
    assert set(comm_info(worker, "jupyter.widget")) == {f["comm_id"] for f in opens.values()}

    # A widget as the cell's value is displayed the same way (ipykernel: display_data too).
    cell = worker.execute("ipywidgets.IntSlider(3)")
    assert cell.ok and cell.result is None
    [shown] = cell.of_type("display")
    slider = widget_opens(cell)["IntSliderModel"]["comm_id"]
    assert shown["data"][WIDGET_VIEW] == {"model_id": slider}


def test_the_frontend_validates_the_widget_version_through_its_comm(worker):
    assert worker.execute("import ipywidgets").ok
    # The notebook's widget extension opens jupyter.widget.version and answers the version.
    cell = comm_request(worker, "comm_open", {"comm_id": "ver", "data": {},
                                              "target_name": "jupyter.widget.version"})
    [version] = cell.of_type("comm_msg")
    assert version["comm_id"] == "ver" and version["data"] == {"version": "~2.1.4"}
    assert comm_request(worker, "comm_msg", {"comm_id": "ver", "data": {"validated": True}}).ok
    cell = worker.execute("ipywidgets.IntSlider()")
    assert cell.ok and "Widget Javascript not detected" not in cell.stderr
    assert worker.execute("ipywidgets.Widget._version_validated").result == {"text/plain": "True"}


def test_the_version_check_at_connect_imports_ipywidgets_so_the_first_widget_is_validated(worker):
    # Notebook 6's widget extension opens jupyter.widget.version when it connects, before any
    # cell imported ipywidgets (ipykernel closes it: "No such comm target", and the first widget
    # then warns "Widget Javascript not detected").
    assert worker.execute("import sys; 'ipywidgets' in sys.modules").result == {"text/plain": "False"}
    cell = comm_request(worker, "comm_open", {"comm_id": "ver0", "data": {},
                                              "target_name": "jupyter.widget.version"})
    assert cell.ok and not cell.of_type("comm_close")
    [version] = cell.of_type("comm_msg")
    assert version["comm_id"] == "ver0" and version["data"] == {"version": "~2.1.4"}
    assert comm_request(worker, "comm_msg", {"comm_id": "ver0", "data": {"validated": True}}).ok
    cell = worker.execute("import ipywidgets; ipywidgets.IntSlider()")
    assert cell.ok and "Widget Javascript not detected" not in cell.stderr


def test_moving_a_slider_from_the_frontend_updates_the_value_and_fires_observers(worker):
    cell = worker.execute("import ipywidgets\nw = ipywidgets.IntSlider(5)\n"
                          "def moved(change):\n"
                          "    print('moved from', change['old'], 'to', change['new'])\n"
                          "w.observe(moved, names='value')\ndisplay(w)")
    slider = widget_opens(cell)["IntSliderModel"]["comm_id"]
    # ipywidgets 6's protocol: backbone sync of the changed state.
    moved = comm_request(worker, "comm_msg", {"comm_id": slider, "data": {
        "method": "backbone", "sync_data": {"value": 7}}})
    assert moved.ok and moved.stdout == "moved from 5 to 7\n"
    assert not moved.of_type("comm_msg")  # the value came from the frontend: not echoed back
    assert worker.execute("w.value").result == {"text/plain": "7"}
    # A change made in Python reaches the frontend's model.
    cell = worker.execute("w.value = 9")
    [update] = cell.of_type("comm_msg")
    assert update["comm_id"] == slider
    assert update["data"] == {"method": "update", "state": {"value": 9}, "buffers": []}
    assert cell.stdout == "moved from 7 to 9\n"


def test_interact_reruns_its_function_when_the_slider_moves_with_its_output_captured(worker):
    cell = worker.execute("from ipywidgets import interact\n"
                          "def square(x):\n"
                          "    print('square of', x, 'is', x * x)\n"
                          "interact(square, x=(0, 10));", msg_id="exec-1")
    assert cell.ok, cell.error
    opens = widget_opens(cell)
    slider, out = opens["IntSliderModel"]["comm_id"], opens["OutputModel"]["comm_id"]
    assert cell.of_type("display")[0]["data"][WIDGET_VIEW]["model_id"] == \
        opens["interactiveModel" if "interactiveModel" in opens else "VBoxModel"]["comm_id"]

    moved = comm_request(worker, "comm_msg", {"comm_id": slider, "data": {
        "method": "backbone", "sync_data": {"value": 7}}}, msg_id="comm-7")
    assert moved.ok, moved.stderr
    assert "square of 7 is 49\n" == moved.stdout
    # The Output widget captures what the function printed: its msg_id is the comm message's
    # while the function runs (the frontend routes output parented to it into the widget),
    # and cleared afterwards. The text arrives between the two.
    order = []
    for kind, value in moved.events:
        if kind == "frame" and value["type"] == "comm_msg" and value["comm_id"] == out:
            state = value["data"].get("state", {})
            if "msg_id" in state:
                order.append(("msg_id", state["msg_id"]))
        elif kind == "frame" and value["type"] == "clear_output":
            order.append(("clear_output", value["wait"]))
        elif kind == "stdout":
            order.append(("stdout", value))
    assert order == [("msg_id", "comm-7"), ("clear_output", True),
                     ("stdout", "square of 7 is 49\n"), ("msg_id", "")], order


def test_errors_in_widget_callbacks_are_shown_on_stderr_of_the_comm_message(worker):
    cell = worker.execute("import ipywidgets\nfrom ipywidgets import interact\n"
                          "w = ipywidgets.IntSlider(1)\n"
                          "w.observe(lambda change: 1 / (change['new'] - 2), names='value')\n"
                          "display(w)\n"
                          "def inverse(x):\n"
                          "    print('inverting', x)\n"
                          "    return 1 / x\n"
                          "interact(inverse, x=(0, 4));")
    assert cell.ok, cell.error
    sliders = [f["comm_id"] for f in cell.of_type("comm_open")
               if f["data"]["_model_name"] == "IntSliderModel"]
    output = [f["comm_id"] for f in cell.of_type("comm_open")
              if f["data"]["_model_name"] == "OutputModel"]
    # An observer that raises while the frontend moves the slider (ipywidgets catches it and
    # calls IPython's showtraceback).
    moved = comm_request(worker, "comm_msg", {"comm_id": sliders[0], "data": {
        "method": "backbone", "sync_data": {"value": 2}}})
    assert moved.done["status"] == "error" and not moved.of_type("error")
    assert "ZeroDivisionError" in _plain(moved.stderr)
    assert worker.execute("w.value").result == {"text/plain": "2"}
    # interact's function raising inside its Output widget: the traceback is written while the
    # widget captures the comm message's output, so it lands in the widget.
    moved = comm_request(worker, "comm_msg", {"comm_id": sliders[1], "data": {
        "method": "backbone", "sync_data": {"value": 0}}}, msg_id="comm-zero")
    assert moved.done["status"] == "error"
    assert moved.stdout == "inverting 0\n" and "ZeroDivisionError" in _plain(moved.stderr)
    capture = [("stderr", "") if kind == "stderr" else ("msg_id", value["data"]["state"]["msg_id"])
               for kind, value in moved.events
               if kind == "stderr" or (kind == "frame" and value.get("comm_id") == output[0]
                                       and "msg_id" in value["data"].get("state", {}))]
    assert capture[0] == ("msg_id", "comm-zero") and capture[-1] == ("msg_id", "")
    assert ("stderr", "") in capture[1:-1], capture
