"""Rich display without IPython: an object's mime bundle, from its _repr_*_ methods.

Follows IPython's rules: _repr_mimebundle_ first, then one _repr_*_ method per mime type
for what is still missing, text/plain always (a pretty layout for long built-in
containers). A failing repr method never propagates: its type is skipped and on_failure
told (the session shows the traceback, as IPython's formatter does); without on_failure, a
note on stderr, and a failing __repr__ becomes a text/plain placeholder.
"""
import binascii
import sys

MIME_REPR_METHODS = (
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_pdf_", "application/pdf"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
    ("_repr_javascript_", "application/javascript"),
)
BINARY_MIMES = frozenset(("image/png", "image/jpeg", "image/gif", "image/webp",
                          "application/pdf"))
# A widget's view (ipywidgets): the model it shows, by the comm id of its model.
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDTH = 79
MAX_SEQ_LENGTH = 1000


def real_method(obj, name):
    """obj's method `name`, or None; ignores classes (their methods are unbound) and objects
    that claim to have every attribute (a permissive __getattr__), as IPython does."""
    if isinstance(obj, type):
        return None
    try:
        if getattr(obj, "_ipython_canary_method_should_not_exist_", None) is not None:
            return None
        method = getattr(obj, name, None)
    except Exception:
        return None
    return method if callable(method) else None


def format_object(obj, include=None, exclude=None, on_failure=None):
    """(data, metadata) for obj; ({}, {}) when obj displayed itself (_ipython_display_).
    on_failure(obj, method_name, exc) hears of each repr method that raised."""
    note_failure = on_failure or _note_failure
    display_self = real_method(obj, "_ipython_display_")
    if display_self is not None:
        try:
            display_self()
            return {}, {}
        except Exception as exc:
            note_failure(obj, "_ipython_display_", exc)
    data, metadata = {}, {}
    figure = _matplotlib_figure_bundle(obj, note_failure)
    if figure is not None:
        data, metadata = figure
    bundle_method = real_method(obj, "_repr_mimebundle_")
    if bundle_method is not None:
        try:
            bundle = bundle_method(include=include, exclude=exclude)
        except Exception as exc:
            note_failure(obj, "_repr_mimebundle_", exc)
        else:
            if isinstance(bundle, tuple) and len(bundle) == 2:
                bundle, extra = bundle
                if isinstance(extra, dict):
                    metadata.update(extra)
            if isinstance(bundle, dict):
                for mime, value in bundle.items():
                    data[str(mime)] = encode_value(str(mime), value)
    for method_name, mime in MIME_REPR_METHODS:
        if mime in data or not _wanted(mime, include, exclude):
            continue
        method = real_method(obj, method_name)
        if method is None:
            continue
        try:
            value = method()
        except Exception as exc:
            note_failure(obj, method_name, exc)
            continue
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
            value, metadata[mime] = value
        if value is None:
            continue
        data[mime] = encode_value(mime, value)
    if "text/plain" not in data:
        text = plain_text(obj, on_failure)
        if text is not None:
            data["text/plain"] = text
    data = {k: v for k, v in data.items() if _wanted(k, include, exclude)}
    return data, metadata


def _wanted(mime, include, exclude):
    if include and mime not in include:
        return False
    return not (exclude and mime in exclude)


def encode_value(mime, value):
    """A bundle value as JSON can carry it: binary images base64, text as str."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        if mime in BINARY_MIMES or not mime.startswith("text/"):
            return binascii.b2a_base64(bytes(value), newline=False).decode("ascii")
        return bytes(value).decode("utf-8", "replace")
    if mime == "application/json" or mime.endswith("+json"):
        if isinstance(value, str):
            import json
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)  # nbformat's multi-line strings
    return str(value)


def encode_bundle(data):
    return {str(mime): encode_value(str(mime), value) for mime, value in data.items()}


def _note_failure(obj, method_name, exc):
    try:
        sys.stderr.write("belljar: %s.%s() raised %s: %s; skipped\n" % (
            type(obj).__name__, method_name, type(exc).__name__, _safe_str(exc)))
    except Exception:
        pass


def _safe_str(value):
    try:
        return str(value)
    except Exception:
        return "<unprintable>"


def _matplotlib_figure_bundle(obj, note_failure):
    cls = type(obj)
    if cls.__name__ != "Figure" or cls.__module__ != "matplotlib.figure":
        return None
    from .figures import figure_bundle
    try:
        return figure_bundle(obj)
    except Exception as exc:
        note_failure(obj, "savefig", exc)
        return None


# -- text/plain --------------------------------------------------------------------------

def plain_text(obj, on_failure=None):
    """repr(obj), pretty for built-in containers. When it raises: None once on_failure is
    told, else a placeholder naming the failure."""
    try:
        if type(obj) in _CONTAINERS:
            return pretty(obj)
        return repr(obj)
    except Exception as exc:
        if on_failure is not None:
            on_failure(obj, "__repr__", exc)
            return None
        return "<%s object at %#x; repr() failed: %s: %s>" % (
            type(obj).__name__, id(obj), type(exc).__name__, _safe_str(exc))


def pretty(obj, width=WIDTH):
    """repr for built-in containers, one item per line when it does not fit in `width`."""
    return _pretty(obj, 0, width, set())


_CONTAINERS = {
    list: ("[", "]", "[...]"),
    tuple: ("(", ")", "(...)"),
    set: ("{", "}", "{...}"),
    frozenset: ("frozenset({", "})", "frozenset(...)"),
    dict: ("{", "}", "{...}"),
}


def _pretty(obj, indent, width, active):
    kind = type(obj)
    if kind not in _CONTAINERS:
        return repr(obj)
    opening, closing, recursive = _CONTAINERS[kind]
    if id(obj) in active:
        return recursive
    if not obj:
        return {set: "set()", frozenset: "frozenset()"}.get(kind, opening + closing)
    active.add(id(obj))
    try:
        inner = indent + len(opening)
        if kind is dict:
            items = []
            for i, (key, value) in enumerate(obj.items()):
                if i == MAX_SEQ_LENGTH:
                    items.append("...")
                    break
                key_text = _pretty(key, inner, width, active)
                items.append("%s: %s" % (key_text, _pretty(
                    value, inner + len(key_text) + 2, width, active)))
        else:
            values = obj
            if kind in (set, frozenset):
                try:
                    values = sorted(obj)
                except Exception:
                    pass
            items = []
            for i, value in enumerate(values):
                if i == MAX_SEQ_LENGTH:
                    items.append("...")
                    break
                items.append(_pretty(value, inner, width, active))
    finally:
        active.discard(id(obj))
    trailing = "," if kind is tuple and len(items) == 1 else ""
    one_line = opening + ", ".join(items) + trailing + closing
    if len(one_line) + indent <= width and "\n" not in one_line:
        return one_line
    return opening + (",\n" + " " * inner).join(items) + trailing + closing
