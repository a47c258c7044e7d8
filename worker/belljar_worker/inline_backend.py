"""matplotlib backend `module://belljar_worker.inline_backend`: figures become PNG displays.

The worker makes this matplotlib's default backend when matplotlib is imported (unless the
user set MPLBACKEND), and `%matplotlib inline` selects it too. As with
matplotlib_inline: plt.show() displays every open figure and closes it, and at the end of a
cell the figures pyplot drew during it are displayed and closed. A figure already displayed
in the cell (e.g. as its value) and not changed since is not shown a second time.
"""
import matplotlib
from matplotlib._pylab_helpers import Gcf
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from . import current, figures

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


class _CellState:
    drew = False   # pyplot drew (created or changed a figure) during this cell


def new_figure_manager(num, *args, FigureClass=Figure, **kwargs):
    return new_figure_manager_given_figure(num, FigureClass(*args, **kwargs))


def new_figure_manager_given_figure(num, figure):
    manager = FigureManagerBase(FigureCanvasAgg(figure), num)
    if matplotlib.is_interactive():
        _CellState.drew = True
    return manager


def draw_if_interactive():
    if matplotlib.is_interactive():
        _CellState.drew = True


def show(close=None, block=None):
    """Display every open pyplot figure, then close them (unless close=False)."""
    from .display import display
    try:
        for manager in Gcf.get_all_fig_managers():
            display(manager.canvas.figure)
    finally:
        _CellState.drew = False
        if close is not False and Gcf.get_all_fig_managers():
            import matplotlib.pyplot as plt
            plt.close("all")


def flush_figures():
    """End of a cell: show what pyplot drew during it, like matplotlib_inline does."""
    shown = dict(figures.shown)
    figures.shown.clear()
    if not _CellState.drew:
        return
    _CellState.drew = False
    import matplotlib.pyplot as plt
    try:
        for manager in Gcf.get_all_fig_managers():
            figure = manager.canvas.figure
            if id(figure) in shown and not figure.stale:
                continue
            from .display import display
            display(figure)
    finally:
        plt.close("all")


def _register_with_session():
    if current.session is not None:
        current.session.add_post_cell_hook(flush_figures)


matplotlib.interactive(True)  # pyplot then reports drawing, so cells show their figures
_register_with_session()
