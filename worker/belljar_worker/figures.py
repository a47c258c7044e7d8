"""matplotlib figures as display bundles, in the formats the session selected (imported only
once a figure is being displayed or the formats are chosen).

The formats are what matplotlib_inline lets a notebook choose (InlineBackend.figure_formats,
set_matplotlib_formats): 'png' by default, 'retina' (a PNG at twice the resolution, shown at
its 1x size), 'jpeg', 'svg', 'pdf'. Both ways a figure is formatted read them here: the worker's
own (formatting.py) and IPython's display formatter once a session has loaded IPython.
"""
import binascii
import io
import weakref

# id(figure) -> figure displayed during the current cell (weak: a figure that is never
# flushed by the inline backend must not be kept alive by this record)
shown = weakref.WeakValueDictionary()

FORMAT_MIMES = {"png": "image/png", "retina": "image/png", "png2x": "image/png",
                "jpg": "image/jpeg", "jpeg": "image/jpeg", "svg": "image/svg+xml",
                "pdf": "application/pdf"}
FIGURE_MIMES = ("image/png", "image/jpeg", "image/svg+xml", "application/pdf")

_selected = {"image/png": "png"}  # mime -> the format that renders it
_print_options = {"bbox_inches": "tight"}  # extra arguments of print_figure


def select_formats(formats, **print_options):
    """Show figures in these formats from now on (as matplotlib_inline's
    set_matplotlib_formats); print_options go to matplotlib's print_figure."""
    formats = {formats} if isinstance(formats, str) else set(formats)
    unknown = formats - set(FORMAT_MIMES)
    if unknown:
        raise ValueError("supported formats are: %s not %s" % (
            ",".join(repr(f) for f in sorted(FORMAT_MIMES)),
            ",".join(repr(f) for f in sorted(unknown))))
    selected = {}
    # IPython's precedence: a retina PNG replaces a plain one.
    for name in ("png", "retina", "png2x", "jpg", "jpeg", "svg", "pdf"):
        if name in formats:
            selected[FORMAT_MIMES[name]] = name
    _selected.clear()
    _selected.update(selected)
    _print_options.clear()
    _print_options.update(print_options)


def figure_data(figure, mime):
    """The figure as `mime` if that type is selected, else None (also for a figure with
    nothing drawn on it). PNG, JPEG and PDF are bytes, SVG text; a retina PNG comes as
    (bytes, {"width", "height"}): the size to show it at, half its pixels."""
    name = _selected.get(mime)
    if name is None or (not figure.axes and not figure.lines):
        return None
    double = name in ("retina", "png2x")
    options = {"format": "png" if double else name, "dpi": figure.dpi * (2 if double else 1),
               "bbox_inches": "tight", "facecolor": figure.get_facecolor(),
               "edgecolor": figure.get_edgecolor()}
    options.update(_print_options)
    buffer = io.BytesIO()
    figure.canvas.print_figure(buffer, **options)
    # Saving toggles properties back and forth, which marks the figure stale; it is drawn
    # as it is now, so only changes made after this point should make it stale again.
    figure.stale = False
    shown[id(figure)] = figure
    data = buffer.getvalue()
    if mime == "image/svg+xml":
        return data.decode("utf-8")
    if double:
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        return data, {"width": width // 2, "height": height // 2}  # the PNG header's size
    return data


def figure_bundle(figure):
    """(data, metadata) for a figure, as display frames carry it."""
    data, metadata = {"text/plain": repr(figure)}, {}
    for mime in FIGURE_MIMES:
        value = figure_data(figure, mime)
        if isinstance(value, tuple):
            value, metadata[mime] = value
        if isinstance(value, bytes):
            value = binascii.b2a_base64(value, newline=False).decode("ascii")
        if value is not None:
            data[mime] = value
    return data, metadata
