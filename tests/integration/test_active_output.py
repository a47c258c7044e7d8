"""--active-output through real jupyter_client: every way a cell can hand the frontend markup
or script (display, update, execute_result, pager payload, user_expressions, inspect, a forged
hello) arrives isolated in a sandboxed frame (the default), stripped, or unchanged (allow);
pandas, LaTeX and PNG arrive as they were.

The rendered HTML is read back with Python's own html.parser, a parser independent of the
supervisor's: outside the frame's srcdoc nothing may be a script, a handler or a javascript: URL.
"""
import base64
import html.parser
import json

import pytest

from belljar_testing import belljar, execute, of_type, running_kernel

ISOLATED_PREFIX = '<div class="belljar-isolated"><iframe sandbox="" '

# One per class of vector: each would run script in the notebook page if rendered as sent.
HTML_VECTORS = {
    "script": "<b>x</b><script>fetch('/api/contents')</script>",
    "img onerror": "<img src=x onerror=\"fetch('/api/terminals',{method:'POST'})\">",
    "svg onload in html": "<svg onload=\"alert(1)\"><circle r=\"2\"/></svg>",
    "javascript: link": "<a href=\"jav&#x09;ascript:alert(1)\">click</a>",
    "iframe": "<iframe src=\"/api/contents\"></iframe>",
    "form": "<form action=\"/api/terminals\" method=\"post\"><button>go</button></form>",
    "object": "<object data=\"data:text/html,<script>alert(1)</script>\"></object>",
    "embed": "<embed src=\"/files/x.svg\">",
    "meta refresh": "<meta http-equiv=\"refresh\" content=\"0;url=/terminals/new\">",
    "base": "<base href=\"https://example.com/\"><a href=\"x\">x</a>",
    "comment trick": "<!--><script>alert(1)</script>-->",
    "svg style mXSS": "<svg><style><img src=x onerror=alert(1)></style></svg>",
    "MathJax href": "<p>$\\href{javascript:alert(1)}{click}$</p>",
}
SVG_VECTOR = "<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"><script>alert(2)</script></svg>"
MARKDOWN_VECTORS = ["raw <img src=x onerror=alert(1)> html", "[x](javascript:alert(1))"]
JS_VECTOR = "fetch('/api/terminals', {method: 'POST'})"


class Rendered(html.parser.HTMLParser):
    """The elements a browser would build from HTML (the iframe's srcdoc stays an attribute)."""

    def __init__(self, markup):
        super().__init__(convert_charrefs=True)
        self.elements = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def assert_inert_page_markup(markup):
    """Nothing in markup, as the page parses it, runs script or reaches the server."""
    for tag, attrs in Rendered(markup).elements:
        assert tag not in {"script", "object", "embed", "form", "meta", "base", "link", "math"}, markup
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            if name in {"href", "src", "xlink:href", "action", "formaction"}:
                assert value and value.strip().lower().startswith(("https:", "http:", "#", "data:image/",
                                                                    "mailto:")), (tag, name, value)
        if tag == "iframe":
            assert attrs.get("sandbox") == "", attrs
            assert "src" not in attrs
            assert "default-src 'none'" in attrs["srcdoc"] and "script-src" not in attrs["srcdoc"]


def assert_isolated(data, original=None):
    html = data["text/html"]
    assert html.startswith(ISOLATED_PREFIX), html[:300]
    assert_inert_page_markup(html)
    frame = [attrs for tag, attrs in Rendered(html).elements if tag == "iframe"][0]
    # The frame holds the checked remainder only, never the markup as sent.
    assert_inert_page_markup(frame["srcdoc"].split("<body>", 1)[1])
    if original is not None:
        assert original not in frame["srcdoc"]
    assert "shown in an isolated frame without its active parts" in html
    assert isinstance(data.get("text/plain"), str)


def display_cell(bundles):
    return "import json\nfor b in json.loads(%r):\n    display(b, raw=True)\n" % json.dumps(bundles)


@pytest.fixture(scope="module")
def kernel():
    with running_kernel(flags=["--timeout", "30"]) as (km, kc):
        yield km, kc


def test_each_html_vector_in_a_display_arrives_isolated(kernel):
    _, kc = kernel
    bundles = [{"text/html": v, "text/plain": name} for name, v in HTML_VECTORS.items()]
    reply, outputs = execute(kc, display_cell(bundles))
    assert reply["content"]["status"] == "ok"
    displays = of_type(outputs, "display_data")
    assert len(displays) == len(HTML_VECTORS)
    for (name, vector), message in zip(HTML_VECTORS.items(), displays):
        data = message["content"]["data"]
        assert data["text/plain"] == name
        assert_isolated(data, vector)


def test_javascript_svg_and_markdown_arrive_isolated_or_as_text(kernel):
    _, kc = kernel
    bundles = [{"application/javascript": JS_VECTOR},
               {"image/svg+xml": SVG_VECTOR, "text/plain": "svg"}]
    bundles += [{"text/markdown": md} for md in MARKDOWN_VECTORS]
    _, outputs = execute(kc, display_cell(bundles))
    js, svg, *markdown = [m["content"]["data"] for m in of_type(outputs, "display_data")]
    assert "application/javascript" not in js
    assert "fetch(" not in js["text/html"]  # isolated output runs no script: it is not sent
    assert "its script was not run (--active-output isolate)" in js["text/html"]
    assert_inert_page_markup(js["text/html"])
    assert "image/svg+xml" not in svg
    assert_isolated(svg)
    for source, data in zip(MARKDOWN_VECTORS, markdown):
        assert set(data) == {"text/plain"}, data
        assert data["text/plain"].startswith(source)
        assert "not rendered (active output, --active-output isolate): text/markdown" in data["text/plain"]


def test_update_display_and_execute_result_are_checked_too(kernel):
    _, kc = kernel
    code = (
        "h = display({'text/html': '<b>first</b>'}, raw=True, display_id=True)\n"
        "h.update({'text/html': '<img src=x onerror=alert(1)>', 'text/plain': 'second'}, raw=True)\n"
        "class Active:\n"
        "    def _repr_html_(self):\n"
        "        return '<script>fetch(\"/api/terminals\", {method: \"POST\"})</script>'\n"
        "Active()\n")
    reply, outputs = execute(kc, code)
    assert reply["content"]["status"] == "ok"
    first = of_type(outputs, "display_data")[0]["content"]["data"]
    assert first["text/html"] == "<b>first</b>"
    update = of_type(outputs, "update_display_data")[0]["content"]
    assert update["transient"]["display_id"]
    assert_isolated(update["data"], "<img src=x onerror=alert(1)>")
    result = of_type(outputs, "execute_result")[0]["content"]["data"]
    assert_isolated(result)
    assert result["text/plain"].startswith("<__main__.Active object")


def test_pager_payload_and_user_expressions_are_checked(kernel):
    _, kc = kernel
    # The worker is the attacker: it rewrites its own payload for this cell's reply.
    setup = (
        "import belljar_worker.current as s\n"
        "s.session._take_payload = lambda: [{'source': 'page', 'start': 0, 'data': {\n"
        "    'text/html': '<svg onload=alert(1)>', 'text/plain': 'paged'}}]\n"
        "class Active:\n"
        "    def _repr_html_(self):\n"
        "        return '<a href=\"javascript:alert(1)\">x</a>'\n"
        "active = Active()\n")
    reply, _ = execute(kc, setup, user_expressions={"x": "active"})
    content = reply["content"]
    assert content["status"] == "ok"
    page = content["payload"][0]
    assert page["source"] == "page"
    assert_isolated(page["data"], "<svg onload=alert(1)>")
    expression = content["user_expressions"]["x"]
    assert expression["status"] == "ok"
    assert_isolated(expression["data"])
    execute(kc, "del s.session._take_payload")


def test_inspect_reply_data_is_checked(kernel):
    _, kc = kernel
    execute(kc, "import belljar_worker.introspection as i\n"
                "i.inspect_reply = lambda *a: {'found': True, 'metadata': {}, 'data': {\n"
                "    'text/html': '<iframe src=\"/api/contents\"></iframe>', 'text/plain': 'doc'}}\n")
    msg_id = kc.inspect("print", 3)
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    assert reply["content"]["found"] is True
    assert_isolated(reply["content"]["data"], '<iframe src="/api/contents"></iframe>')


def test_a_forged_hello_cannot_set_language_info(kernel):
    _, kc = kernel
    execute(kc, "import belljar_worker.current as s\n"
                "s.session.channel.send({'type': 'hello', 'language_info': {\n"
                "    'name': '<img src=x onerror=alert(1)>', 'version': '3<script>',\n"
                "    'codemirror_mode': '../../../../files/evil', 'mimetype': 'text/html'}})\n")
    kc.kernel_info()
    reply = kc.get_shell_msg(timeout=30)
    info = reply["content"]["language_info"]
    assert info["name"] == "python"
    assert info["codemirror_mode"] == {"name": "ipython", "version": 3}
    assert info["mimetype"] == "text/x-python"
    assert "<" not in info["version"]


def test_pandas_latex_and_png_arrive_as_they_were(kernel):
    _, kc = kernel
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(64))).decode()
    code = (
        "import pandas as pd\n"
        "df = pd.DataFrame({'limit': ['time cap', 'workspace only'], 'value': ['60 s', 'a < b']})\n"
        "display(df)\n"
        "display({'text/latex': r'$\\frac{1}{2}$', 'text/plain': 'half'}, raw=True)\n"
        "display({'image/png': %r, 'text/plain': 'png'}, raw=True)\n"
        "display({'text/markdown': '**bold** [docs](https://docs.python.org/3/)'}, raw=True)\n" % png)
    reply, outputs = execute(kc, code)
    assert reply["content"]["status"] == "ok", reply["content"]
    table, latex, image, markdown = [m["content"]["data"] for m in of_type(outputs, "display_data")]
    assert '<table border="1" class="dataframe">' in table["text/html"]
    assert "<style scoped=\"\">" in table["text/html"]
    assert "a &lt; b" in table["text/html"] and "workspace only" in table["text/html"]
    assert "iframe" not in table["text/html"] and "[belljar]" not in table["text/html"]
    assert latex == {"text/latex": "$\\frac{1}{2}$", "text/plain": "half"}
    assert image == {"image/png": png, "text/plain": "png"}
    assert markdown["text/markdown"] == "**bold** [docs](https://docs.python.org/3/)"


def test_strip_removes_active_parts_with_a_notice():
    with running_kernel(flags=["--active-output", "strip"]) as (_, kc):
        _, outputs = execute(kc, display_cell([
            {"text/html": "<b>kept</b><script>fetch('/api/contents')</script><img src=x onerror=alert(1)>"},
            {"application/javascript": JS_VECTOR}]))
        html, js = [m["content"]["data"] for m in of_type(outputs, "display_data")]
        assert html["text/html"].startswith("<b>kept</b><img src=\"x\"/>") or \
            html["text/html"].startswith("<b>kept</b><img/>") or html["text/html"].startswith("<b>kept</b>")
        assert "iframe" not in html["text/html"]
        assert "active content removed from this output" in html["text/html"]
        assert_inert_page_markup(html["text/html"])
        assert "application/javascript" not in js
        assert "active content removed from this output: application/javascript" in js["text/html"]


def test_allow_passes_everything_and_the_banner_says_so():
    with running_kernel(flags=["--active-output", "allow"]) as (_, kc):
        kc.kernel_info()
        banner = kc.get_shell_msg(timeout=30)["content"]["banner"]
        assert "ACTIVE OUTPUT IS NOT ISOLATED (--active-output allow)" in banner
        _, outputs = execute(kc, display_cell([{"application/javascript": JS_VECTOR},
                                               {"text/html": HTML_VECTORS["script"]}]))
        js, html = [m["content"]["data"] for m in of_type(outputs, "display_data")]
        assert js == {"application/javascript": JS_VECTOR}
        assert html == {"text/html": HTML_VECTORS["script"]}


def test_a_bad_mode_is_one_clear_error():
    done = belljar("check", "--active-output", "sometimes")
    assert done.returncode == 2
    assert "--active-output sometimes: expected isolate, strip or allow" in done.stderr
