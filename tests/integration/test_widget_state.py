"""What the page may receive of the worker's comm traffic (kernel/output/widget_models.hpp).

The notebook page acts on comm messages with the server's authority: Notebook 6 hands a
comm_open's target_module, and the widget manager a model's _model_module / _view_module, to
requirejs (a workspace file served at /files/ would run as script in the page); widget views put
`description` and HTML values in with innerHTML, typeset Label and HTMLMath text with MathJax, and
set layout traits as CSS. Each cell here sends what the attacker in the sandbox would, as the
frontend would receive it through jupyter_client; under --active-output allow the same messages
pass unchanged (so the checks here are what makes the difference). tests/browser runs the
module-loading vectors in a real page."""
import hashlib
import json
import pathlib
import re
import tempfile

import pytest

from belljar_testing import (
    FRONTENDS,
    SANDBOX_VENV_PYTHON,
    comm_round,
    execute,
    of_type,
    outputs_of,
    running_kernel,
    started_from,
    stderr_of,
    stdout_of,
)

EVIL_MODULE = "/files/evil.js"
RAW_WIDGET = """
from comm import create_comm
def widget(state, comm_id=None):
    return create_comm(target_name='jupyter.widget', data=state, comm_id=comm_id)
"""


@pytest.fixture(scope="module")
def kernel():
    with running_kernel(flags=["--timeout", "20"]) as (km, kc):
        reply, outputs = execute(kc, RAW_WIDGET + "import ipywidgets as w")
        assert reply["content"]["status"] == "ok", stderr_of(outputs)
        yield km, kc


def sent(kc, code):
    reply, outputs = execute(kc, code)
    assert reply["content"]["status"] == "ok", (reply["content"], stderr_of(outputs))
    return outputs


def opened_states(outputs):
    """comm_id -> the state the page would build a model from (6: data, 7/8: data.state)."""
    return {m["content"]["comm_id"]: m["content"]["data"].get("state", m["content"]["data"])
            for m in of_type(outputs, "comm_open")}


def state_of(outputs, model_name):
    states = [s for s in opened_states(outputs).values() if s.get("_model_name") == model_name]
    assert len(states) == 1, opened_states(outputs)
    return states[0]


def test_a_comm_never_names_a_module_for_the_page_to_load(kernel):
    _, kc = kernel
    outputs = sent(kc, "from comm import create_comm\n"
                       f"c = create_comm(target_name='anything', target_module={EVIL_MODULE!r})")
    (opened,) = of_type(outputs, "comm_open")
    assert opened["content"]["target_name"] == "anything"
    assert opened["content"]["target_module"] is None


def test_a_widget_from_another_module_is_withheld_with_its_later_messages(kernel):
    _, kc = kernel
    outputs = sent(kc, f"evil = widget({{'_model_module': {EVIL_MODULE!r}, '_model_name': 'X',"
                       " '_view_module': 'jupyter-js-widgets', '_view_name': 'HTMLView'},"
                       " comm_id='evil-widget')\n"
                       "evil.send({'method': 'update', 'state': {'value': 1}})\n"
                       "evil.send({'method': 'display'})")
    assert not [m for m in outputs if m["msg_type"].startswith("comm_")], outputs
    notice = stderr_of(outputs)
    assert "3 comm message(s) from the sandbox were withheld" in notice
    assert f'_model_module is "{EVIL_MODULE}"' in notice
    # 7/8 shape (data.state), a view module, a name that is not a class name: the same.
    for state in ({"state": {"_model_module": "@jupyter-widgets/controls",
                             "_view_module": "https://example.com/x.js"}},
                  {"_model_module": "jupyter-js-widgets", "_model_name": "../../files/x"}):
        outputs = sent(kc, f"widget({state!r})")
        assert not of_type(outputs, "comm_open"), outputs
        assert "withheld" in stderr_of(outputs)


def test_an_update_may_not_switch_a_checked_widget_to_another_module(kernel):
    _, kc = kernel
    outputs = sent(kc, "s = w.IntSlider(1)\n"
                       f"s.comm.send({{'method': 'update', 'state': {{'_view_module': {EVIL_MODULE!r}}}}})\n"
                       "s.value = 2")
    assert len(of_type(outputs, "comm_open")) == 3  # layout, style, slider
    updates = [m["content"]["data"] for m in of_type(outputs, "comm_msg")]
    assert {"method": "update", "state": {"value": 2}, "buffers": []} in updates
    assert not any(EVIL_MODULE in json.dumps(u) for u in updates), updates
    assert "1 comm message(s) from the sandbox were withheld" in stderr_of(outputs)


def test_markup_in_descriptions_and_html_values_loses_its_active_parts(kernel):
    _, kc = kernel
    outputs = sent(kc, "s = w.IntSlider(description='<b>work</b><img src=x onerror=alert(1)>load')\n"
                       "h = w.HTML(value='<script>alert(2)</script><i>kept</i>')")
    description = state_of(outputs, "IntSliderModel")["description"]
    assert "<b>work</b>" in description and "load" in description
    assert "onerror" not in description and "alert" not in description
    value = state_of(outputs, "HTMLModel")["value"]
    assert "<i>kept</i>" in value and "script" not in value and "alert" not in value
    assert "2 widget value(s) held active content" in stderr_of(outputs)
    # Plain text passes untouched; so do the values of widgets that show them as text.
    outputs = sent(kc, "t = w.Text(value='a < b & <img src=x onerror=y>', description='Name')")
    assert state_of(outputs, "TextModel")["value"] == "a < b & <img src=x onerror=y>"
    assert state_of(outputs, "TextModel")["description"] == "Name"
    assert "widget value" not in stderr_of(outputs)


def test_an_update_is_checked_as_the_open_was(kernel):
    _, kc = kernel
    outputs = sent(kc, "h = w.HTML(value='<b>a</b>')\nh.value = '<img src=x onerror=alert(3)>b'")
    values = [m["content"]["data"]["state"]["value"] for m in of_type(outputs, "comm_msg")
              if "value" in m["content"]["data"].get("state", {})]
    assert values and all("onerror" not in v for v in values), values


def test_a_model_that_was_once_html_stays_html(kernel):
    # The page's class is fixed by the open: a later name can't make the value plain text.
    _, kc = kernel
    outputs = sent(kc, "m = widget({'_model_module': 'jupyter-js-widgets', '_model_name': 'HTMLModel',"
                       " '_view_module': 'jupyter-js-widgets', '_view_name': 'HTMLView', 'value': ''})\n"
                       "m.send({'method': 'update', 'state': {'_model_name': 'TextModel',"
                       " 'value': '<img src=x onerror=alert(4)>'}})")
    (update,) = of_type(outputs, "comm_msg")
    assert "onerror" not in update["content"]["data"]["state"]["value"]


def test_typeset_text_with_active_tex_is_replaced(kernel):
    _, kc = kernel
    outputs = sent(kc, "l = w.Label(value=r'$\\href{javascript:alert(5)}{x}$')\n"
                       "m = w.HTMLMath(value=r'$x^2$ and $\\require{action}$')\n"
                       "k = w.Label(value=r'$\\alpha + \\beta$')")
    labels = [s for s in opened_states(outputs).values() if s.get("_model_name") == "LabelModel"]
    assert sorted(s["value"] for s in labels) == sorted(
        ["[belljar] withheld: active content", r"$\alpha + \beta$"])
    math = state_of(outputs, "HTMLMathModel")["value"]  # the macro broken, the rest kept
    assert "\\require" not in math and math.startswith("$x^2$ and")


def test_layout_css_that_fetches_is_dropped(kernel):
    _, kc = kernel
    outputs = sent(kc, "b = w.Button(description='go', layout=w.Layout(width='calc(50% - 2px)',"
                       " border='url(https://example.com/?leak) 1px', height='1em;background:url(x)'))")
    layout = state_of(outputs, "LayoutModel")
    assert layout["width"] == "calc(50% - 2px)"
    assert "border" not in layout and "height" not in layout
    assert "2 widget value(s) held active content" in stderr_of(outputs)


def test_output_models_and_url_images_of_newer_ipywidgets_are_checked(kernel):
    _, kc = kernel
    outputs = sent(kc, "o = widget({'state': {'_model_module': '@jupyter-widgets/output',"
                       " '_model_name': 'OutputModel', 'outputs': [{'output_type': 'display_data',"
                       " 'metadata': {}, 'data': {'text/html': '<script>alert(6)</script>'}}]}})\n"
                       "i = widget({'state': {'_model_module': '@jupyter-widgets/controls',"
                       " '_model_name': 'ImageModel', 'format': 'url', 'width': '10'}})")
    states = list(opened_states(outputs).values())
    (output,) = [s for s in states if s["_model_name"] == "OutputModel"]
    html = output["outputs"][0]["data"]["text/html"]
    assert "<iframe sandbox=\"\"" in html  # isolated, as the same display would be
    (image,) = [s for s in states if s["_model_name"] == "ImageModel"]
    assert "format" not in image and image["width"] == "10"


def test_views_show_only_checked_models(kernel):
    _, kc = kernel
    outputs = sent(kc, "s = w.IntSlider(7)\ndisplay(s)\n"
                       "display({'application/vnd.jupyter.widget-view+json': {'model_id': 'evil-widget'}},"
                       " raw=True)")
    shown, unknown = [m["content"]["data"] for m in of_type(outputs, "display_data")]
    (slider_id,) = [i for i, s in opened_states(outputs).items()
                    if s.get("_model_name") == "IntSliderModel"]
    assert shown["application/vnd.jupyter.widget-view+json"] == {"model_id": slider_id}
    assert "application/vnd.jupyter.widget-view+json" not in unknown
    assert "not rendered (active output" in unknown["text/plain"]


def test_comm_info_names_only_comms_the_page_was_told_of(kernel):
    # A reloaded page rebuilds its widgets from comm_info_reply: a withheld widget (it is in the
    # worker's registry) must not be in it.
    _, kc = kernel
    sent(kc, f"hidden = widget({{'_model_module': {EVIL_MODULE!r}, '_model_name': 'X'}},"
             " comm_id='hidden-widget')\nshown = w.IntSlider(1)\nshown_id = shown.model_id")
    msg_id = kc.comm_info("jupyter.widget")
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    comms = reply["content"]["comms"]
    assert "hidden-widget" not in comms and "evil-widget" not in comms
    assert len(comms) >= 1 and all(c["target_name"] == "jupyter.widget" for c in comms.values())


def test_allow_passes_the_same_messages_unchanged():
    with running_kernel(flags=["--timeout", "20", "--active-output", "allow"]) as (_, kc):
        outputs = sent(kc, RAW_WIDGET + "from comm import create_comm\n"
                       f"c = create_comm(target_name='anything', target_module={EVIL_MODULE!r})\n"
                       f"evil = widget({{'_model_module': {EVIL_MODULE!r}, '_model_name': 'X'}})\n"
                       "import ipywidgets as w\nh = w.HTML(value='<script>alert(7)</script>')")
        opens = of_type(outputs, "comm_open")
        assert opens[0]["content"]["target_module"] == EVIL_MODULE
        assert opens[1]["content"]["data"]["_model_module"] == EVIL_MODULE
        assert state_of(outputs, "HTMLModel")["value"] == "<script>alert(7)</script>"


# -- ipywidgets 8 (widget protocol 2), in a learner's venv of current PyPI releases ----------


@pytest.fixture(scope="module")
def kernel8():
    with running_kernel(flags=["--timeout", "20", "--python", SANDBOX_VENV_PYTHON]) as (km, kc):
        # ipywidgets 8 stands on the `comm` package alone: the worker's ipykernel stand-in,
        # which Debian's ipywidgets 6 imports, is never loaded for it.
        reply, outputs = execute(kc, RAW_WIDGET + "import ipywidgets as w, sys\n"
                                 "assert w.__version__.startswith('8.'), w.__version__\n"
                                 "w.IntSlider()\n"
                                 "assert 'ipykernel' not in sys.modules, sorted(sys.modules)")
        assert reply["content"]["status"] == "ok", stderr_of(outputs)
        yield km, kc


def test_ipywidgets_8_ordinary_widgets_reach_the_page_whole(kernel8):
    _, kc = kernel8
    outputs = sent(kc, "from IPython.display import display\n"
                       "png = bytes.fromhex('89504e470d0a1a0a')\n"
                       "s = w.IntSlider(value=3, description='n'); d = w.Dropdown(options=['a', 'b'])\n"
                       "b = w.Button(description='go'); h = w.HTML(value='<b>bold</b>')\n"
                       "i = w.Image(value=png, format='png'); o = w.Output()\n"
                       "display(s, d, b, h, i, o)\n"
                       "with o:\n    print('inside the output widget')")
    states = opened_states(outputs)
    versions = {(s["_model_module"], s["_model_module_version"]) for s in states.values()}
    assert versions == {("@jupyter-widgets/base", "2.0.0"), ("@jupyter-widgets/controls", "2.0.0"),
                        ("@jupyter-widgets/output", "1.0.0")}, versions
    for model in ("IntSliderModel", "DropdownModel", "ButtonModel", "HTMLModel", "ImageModel",
                  "OutputModel"):
        state_of(outputs, model)
    assert state_of(outputs, "HTMLModel")["value"] == "<b>bold</b>"  # inert markup passes as is
    views = [m for m in of_type(outputs, "display_data")
             if "application/vnd.jupyter.widget-view+json" in m["content"]["data"]]
    assert len(views) == 6
    # The image's bytes travel as a binary buffer (protocol 2's buffer_paths), not in the JSON.
    (image_open,) = [m for m in of_type(outputs, "comm_open")
                     if m["content"]["data"]["state"].get("_model_name") == "ImageModel"]
    assert image_open["content"]["data"]["buffer_paths"] == [["value"]]
    assert bytes(image_open["buffers"][0]) == bytes.fromhex("89504e470d0a1a0a")
    # Each comm_open carries the widget protocol's version in its metadata: ipywidgets 8's page
    # refuses to make a model without it ("Wrong widget protocol version").
    assert {m["metadata"].get("version") for m in of_type(outputs, "comm_open")} == {"2.1.0"}
    # What the Output widget captures is the cell's output, routed by the page to the widget.
    assert any(m["content"].get("text") == "inside the output widget\n"
               for m in of_type(outputs, "stream"))
    assert "withheld" not in stderr_of(outputs)


def test_ipywidgets_8_active_parts_and_unregistered_versions_are_withheld(kernel8):
    _, kc = kernel8
    outputs = sent(kc, "h = w.HTML(value='<script>alert(1)</script><i>kept</i>')")
    value = state_of(outputs, "HTMLModel")["value"]
    assert "<i>kept</i>" in value and "script" not in value and "alert" not in value
    assert "held active content" in stderr_of(outputs)
    # A controls model at a major ipywidgets never registered: the page would look for it
    # elsewhere (a CDN). Withheld, said once.
    outputs = sent(kc, "c = widget({'state': {'_model_module': '@jupyter-widgets/controls',\n"
                       "    '_model_module_version': '99.0.0', '_model_name': 'IntSliderModel',\n"
                       "    '_view_module': '@jupyter-widgets/controls', '_view_module_version': '2.0.0',\n"
                       "    '_view_name': 'IntSliderView', 'value': 1}, 'buffer_paths': []})")
    assert of_type(outputs, "comm_open") == []
    assert "not a version of @jupyter-widgets/controls that ipywidgets registers" in stderr_of(outputs)
    # The metadata keeps the version alone, of digits and dots; nothing else reaches the page.
    outputs = sent(kc, "from comm import create_comm\n"
                       "create_comm(target_name='belljar.probe', data={}, metadata={\n"
                       "    'version': '2.1.0', 'html': '<img src=x onerror=alert(1)>'})\n"
                       "create_comm(target_name='belljar.probe', data={},\n"
                       "            metadata={'version': '2<img src=x onerror=alert(1)>'})")
    assert [m["metadata"] for m in of_type(outputs, "comm_open")] == [{"version": "2.1.0"}, {}]


def update(kc, comm_id, state, buffer_paths=(), buffers=()):
    """The page sets a widget's state (a slider moved, a file picked): what it publishes."""
    return comm_round(kc, "comm_msg", {"comm_id": comm_id, "data": {
        "method": "update", "state": state, "buffer_paths": [list(p) for p in buffer_paths]}}, buffers)


def model_ids(kc, names):
    return dict(zip(names.split(), stdout_of(sent(kc, "print(" + ".model_id, ".join(names.split())
                                                     + ".model_id)")).split()))


def test_ipywidgets_8_echoes_an_update_from_the_page_and_links_follow_it(kernel8):
    """Protocol 2: the kernel answers each update with `echo_update` (the page keeps its own
    value until the kernel agrees); link() follows in the sandbox, and jslink's LinkModel, which
    the page runs, passes the checks with the widgets it names."""
    _, kc = kernel8
    outputs = sent(kc, "a = w.IntSlider(); b = w.IntSlider(); c = w.IntText()\n"
                       "k = w.link((a, 'value'), (b, 'value'))\n"
                       "j = w.jslink((a, 'value'), (c, 'value'))")
    link = state_of(outputs, "LinkModel")
    ids = model_ids(kc, "a b c")
    assert link["source"] == ["IPY_MODEL_" + ids["a"], "value"]
    assert link["target"] == ["IPY_MODEL_" + ids["c"], "value"]
    assert "withheld" not in stderr_of(outputs)

    answers = [(m["content"]["comm_id"], m["content"]["data"]["method"], m["content"]["data"]["state"])
               for m in of_type(update(kc, ids["a"], {"value": 7}), "comm_msg")]
    assert (ids["a"], "echo_update", {"value": 7}) in answers
    assert (ids["b"], "update", {"value": 7}) in answers  # link() moved b in the sandbox
    assert stdout_of(sent(kc, "print(a.value, b.value)")) == "7 7\n"


def test_ipywidgets_8_file_upload_brings_the_bytes_into_the_sandbox_and_none_back(kernel8):
    """FileUpload: the file's bytes travel from the page as a binary buffer; the kernel does not
    echo them back (ipywidgets marks the value echo_update=False), so they are charged once."""
    _, kc = kernel8
    sent(kc, "up = w.FileUpload()")
    payload = bytes(range(256)) * 4096  # 1 MiB
    outputs = update(kc, model_ids(kc, "up")["up"], {"value": [
        {"name": "data.bin", "type": "application/octet-stream", "size": len(payload),
         "last_modified": 0}]}, [["value", 0, "content"]], [payload])
    assert sum(len(json.dumps(m["content"])) + sum(len(bytes(b)) for b in m.get("buffers", []))
               for m in of_type(outputs, "comm_msg")) < 4096
    shown = stdout_of(sent(kc, "import hashlib\nf = up.value[0]\n"
                               "print(f.name, f.size, hashlib.sha256(f.content).hexdigest())"))
    assert shown == "data.bin %d %s\n" % (len(payload), hashlib.sha256(payload).hexdigest())


# -- a reloaded page: ipywidgets 8's control comm (issue 39, finding 1) ---------------------------

# An HTML widget shown plain, then given markup that acts: the update is cleaned, and a page that
# is reloaded rebuilds the model from `update_states` — the Python side's own, raw state.
RELOAD_MARKUP = "<img src=x onerror=\"fetch('/api/contents')\"><b>kept</b>"
RELOAD_CELL = ("from IPython.display import display\nimport ipywidgets as w\n"
               "h = w.HTML(value='plain')\ndisplay(h)\n"
               f"h.value = {RELOAD_MARKUP!r}\nprint(h.model_id)")


def states_after_reload(kc, control_id="control-after-reload"):
    """What ipywidgets 8's page does when a notebook is reopened: it opens a
    jupyter.widget.control comm (protocol 1 in the metadata) and asks for every model's state.
    Returns the update_states reply's states and what the request published."""
    msg = kc.session.msg("comm_open", {"comm_id": control_id,
                                       "target_name": "jupyter.widget.control", "data": {}},
                         metadata={"version": "1.0.0"})
    kc.session.send(kc.shell_channel.socket, msg)
    outputs_of(kc, msg["header"]["msg_id"])
    outputs = comm_round(kc, "comm_msg", {"comm_id": control_id,
                                          "data": {"method": "request_states"}})
    replies = [m for m in of_type(outputs, "comm_msg")
               if m["content"]["data"].get("method") == "update_states"]
    assert len(replies) == 1, outputs
    return replies[0]["content"]["data"]["states"], outputs


@pytest.fixture(scope="module")
def ipykernel8():
    """The control: ipykernel 7 with ipywidgets 8 (the frontends venv), where nothing checks."""
    with tempfile.TemporaryDirectory(prefix="belljar-ipykernel-") as kernels:
        spec = pathlib.Path(kernels) / "ipykernel8"
        spec.mkdir()
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [str(FRONTENDS / "bin" / "python"), "-m", "ipykernel_launcher", "-f",
                     "{connection_file}"],
            "display_name": "ipykernel 7, ipywidgets 8", "language": "python"}))
        with started_from(kernels, "ipykernel8") as (km, kc):
            yield km, kc


def test_control_the_raw_state_reaches_a_reloaded_page_on_ipykernel(ipykernel8):
    _, kc = ipykernel8
    reply, outputs = execute(kc, RELOAD_CELL)
    assert reply["content"]["status"] == "ok", stderr_of(outputs)
    html_id = stdout_of(outputs).strip()
    states, _ = states_after_reload(kc)
    assert states[html_id]["model_name"] == "HTMLModel"
    assert states[html_id]["state"]["value"] == RELOAD_MARKUP  # the probe: this is what acts


def test_a_reloaded_page_gets_each_models_state_checked_as_its_updates_were(kernel8):
    _, kc = kernel8
    outputs = sent(kc, RELOAD_CELL)
    html_id = stdout_of(outputs).strip()
    (update_msg,) = [m for m in of_type(outputs, "comm_msg")
                     if m["content"]["comm_id"] == html_id]
    cleaned = update_msg["content"]["data"]["state"]["value"]
    assert "onerror" not in cleaned and "<b>kept</b>" in cleaned  # the update, cleaned (before)
    states, outputs = states_after_reload(kc)
    entry = states[html_id]
    assert entry["model_name"] == "HTMLModel"
    assert entry["model_module"] == "@jupyter-widgets/controls"
    assert entry["state"]["value"] == cleaned  # the same markup the update carried
    assert "onerror" not in json.dumps([m["content"] for m in of_type(outputs, "comm_msg")])
    assert "held active content" in stderr_of(outputs)
    # A model whose comm_open was withheld is not rebuilt from the reply either.
    outputs = sent(kc, "from traitlets import Unicode\n"
                       "class Elsewhere(w.DOMWidget):\n"
                       f"    _model_module = Unicode({EVIL_MODULE!r}).tag(sync=True)\n"
                       "    _model_name = Unicode('HTMLModel').tag(sync=True)\n"
                       "e = Elsewhere()\nprint(e.model_id)")
    assert f'_model_module is "{EVIL_MODULE}"' in stderr_of(outputs)
    elsewhere_id = stdout_of(outputs).strip()
    states, outputs = states_after_reload(kc, "control-again")
    assert html_id in states and elsewhere_id not in states
    assert EVIL_MODULE not in json.dumps([m["content"] for m in of_type(outputs, "comm_msg")])


def test_the_workers_own_control_messages_are_held_to_the_table(kernel8):
    """The sandbox holds the control comm the page opened (Widget._control_comm) and can send on
    it, or open its own: a forged update_states keeps only models the page was told of, each
    checked; a control comm the worker opens, and a method ipywidgets never sends the page, are
    withheld and said."""
    _, kc = kernel8
    states_after_reload(kc, "control-forged")
    outputs = sent(kc, "from ipywidgets.widgets.widget import Widget\n"
                       "h = w.HTML('x'); print(h.model_id)\n"
                       "entry = lambda name, module, value: {'model_name': name, 'model_module': module,\n"
                       "    'model_module_version': '2.0.0', 'state': {'value': value}}\n"
                       "Widget._control_comm.send({'method': 'update_states', 'states': {\n"
                       f"    h.model_id: entry('HTMLModel', '@jupyter-widgets/controls', {RELOAD_MARKUP!r}),\n"
                       f"    'made-up': entry('HTMLModel', '@jupyter-widgets/controls', {RELOAD_MARKUP!r}),\n"
                       f"    'x': entry('HTMLModel', {EVIL_MODULE!r}, 'y')}}, 'buffer_paths': []}})\n"
                       "mine = create_comm(target_name='jupyter.widget.control', data={\n"
                       "    'method': 'update_states', 'states': {}, 'buffer_paths': []})\n"
                       "h.comm.send({'method': 'request_state'})")
    html_id = stdout_of(outputs).strip()
    (forged,) = [m for m in of_type(outputs, "comm_msg")
                 if m["content"]["comm_id"] == "control-forged"]
    states = forged["content"]["data"]["states"]
    assert list(states) == [html_id]
    assert "onerror" not in states[html_id]["state"]["value"]
    assert [m for m in of_type(outputs, "comm_open")
            if m["content"]["target_name"] == "jupyter.widget.control"] == []
    assert not [m for m in of_type(outputs, "comm_msg")
                if m["content"]["data"].get("method") == "request_state"]
    notice = stderr_of(outputs)
    assert "2 comm message(s) from the sandbox were withheld" in notice, notice
    assert "not a message ipywidgets sends there" in notice


def test_a_link_the_page_runs_may_not_copy_text_into_markup(kernel8):
    """jslink makes the page copy one model's trait into another's, past every check: a Text's
    value (text, passed as is) linked to an HTML value would go into the page as markup. Such a
    link is withheld; one between text traits passes (test_ipywidgets_8_echoes..., the control)."""
    _, kc = kernel8
    outputs = sent(kc, f"t = w.Text(value={RELOAD_MARKUP!r}); h = w.HTML('plain')\n"
                       "j = w.jslink((t, 'value'), (h, 'value'))")
    assert state_of(outputs, "TextModel")["value"] == RELOAD_MARKUP  # text: shown as text
    assert [s for s in opened_states(outputs).values() if s.get("_model_name") == "LinkModel"] == []
    assert "the page would copy values into a trait that is markup" in stderr_of(outputs)


def test_an_upload_past_the_memory_limit_restarts_the_session_and_the_next_cell_says_so():
    """A file upload is the page's bytes in the sandbox's memory: past --memory the handler's
    session goes like a cell's would. The handler's stderr says so (a page shows it nowhere),
    and so does the next cell, before its own output."""
    with running_kernel(flags=["--timeout", "20", "--memory", "128M", "--python", SANDBOX_VENV_PYTHON]) as (_, kc):
        sent(kc, "import ipywidgets as w\nup = w.FileUpload()\nkept = 'still here'")
        size = 60 << 20
        outputs = update(kc, model_ids(kc, "up")["up"], {"value": [
            {"name": "big.bin", "type": "application/octet-stream", "size": size, "last_modified": 0}]},
            [["value", 0, "content"]], [b"x" * size])
        notice = "[belljar] a widget's handler (a comm message from the page) ended the session: "
        # With a memory cgroup the kernel sees the limit kill the worker; with only an address-
        # space limit (as nobody, without cgroup delegation) the worker itself finds the request
        # does not fit, and says so before it ends.
        cause = re.search(re.escape(notice) + r"(MemoryError: the session passed its memory limit "
                          r"of 128\.0 MiB \(--memory\)|WorkerDied: )", stderr_of(outputs))
        assert cause, stderr_of(outputs)
        if cause[1].startswith("WorkerDied"):
            assert ("[belljar] a request from the frontend did not fit in the sandbox's memory "
                    "limit (--memory)") in stderr_of(outputs)
            assert "Traceback" not in stderr_of(outputs)
        reply, outputs = execute(kc, "print('kept' in dir())")
        assert reply["content"]["status"] == "ok"
        assert stderr_of(outputs).startswith(notice + cause[1]) and stdout_of(outputs) == "False\n"
        _, outputs = execute(kc, "print('once')")
        assert stderr_of(outputs) == ""  # said once
