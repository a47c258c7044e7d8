"""matplotlib figures as PNG bundles (imported only once a figure is being displayed)."""
import binascii
import io
import weakref

# id(figure) -> figure displayed during the current cell (weak: a figure that is never
# flushed by the inline backend must not be kept alive by this record)
shown = weakref.WeakValueDictionary()


def figure_png(figure):
    """PNG bytes of figure, or None for a figure with nothing drawn on it."""
    if not figure.axes and not figure.lines:
        return None
    buffer = io.BytesIO()
    figure.canvas.print_figure(buffer, format="png", bbox_inches="tight", dpi=figure.dpi,
                               facecolor=figure.get_facecolor(),
                               edgecolor=figure.get_edgecolor())
    # Saving toggles properties back and forth, which marks the figure stale; it is drawn
    # as it is now, so only changes made after this point should make it stale again.
    figure.stale = False
    shown[id(figure)] = figure
    return buffer.getvalue()


def figure_bundle(figure):
    """(data, metadata) for a figure, as display frames carry it."""
    data = {"text/plain": repr(figure)}
    png = figure_png(figure)
    if png is not None:
        data["image/png"] = binascii.b2a_base64(png, newline=False).decode("ascii")
    return data, {}
