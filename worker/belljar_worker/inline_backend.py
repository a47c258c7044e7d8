"""belljar's matplotlib backend: figures become displays, in the formats the session chose.

Its name is matplotlib_inline's, `module://matplotlib_inline.backend_inline`, where the
sandbox's Python has matplotlib_inline (code and libraries compare matplotlib.get_backend() with
it): the worker then stands in for that module with this one (build_stand_in), and takes
matplotlib_inline's InlineBackend configuration (`%config InlineBackend.figure_format = 'svg'`)
and set_matplotlib_formats() as the formats' source (figures.py). Elsewhere it is
`module://belljar_worker.inline_backend`. The worker makes it matplotlib's default backend when
matplotlib is imported (unless the user set MPLBACKEND), and `%matplotlib inline` selects it too.
As with matplotlib_inline: plt.show() displays every open figure and closes it, and at the end
of a cell the figures pyplot drew during it are displayed and closed. A figure already
displayed in the cell (e.g. as its value) and not changed since is not shown a second time.
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


def set_matplotlib_formats(*formats, **kwargs):
    """Show figures in these formats from now on: 'png', 'retina', 'jpeg', 'svg', 'pdf'
    (matplotlib_inline's function). Keyword arguments go to matplotlib's print_figure, over
    InlineBackend.print_figure_kwargs."""
    config = _Config.instance
    options = dict(config.print_figure_kwargs) if config is not None else {"bbox_inches": "tight"}
    options.update(kwargs)
    figures.select_formats(formats, **options)


def set_matplotlib_close(close=True):
    """matplotlib_inline's switch, kept in InlineBackend.close_figures for code that reads it
    back; this backend closes the figures it shows either way."""
    if _Config.instance is not None:
        _Config.instance.close_figures = close


# What `matplotlib_inline.backend_inline` offers, besides InlineBackend (see build_stand_in).
STAND_IN_NAMES = ("FigureCanvas", "FigureManager", "new_figure_manager",
                  "new_figure_manager_given_figure", "draw_if_interactive", "show",
                  "flush_figures", "set_matplotlib_formats", "set_matplotlib_close")


class _Config:
    instance = None  # the session's InlineBackend, once build_stand_in made it


def build_stand_in(module):
    """Fill in the worker's `matplotlib_inline.backend_inline` (import_hooks.StandInModules):
    this backend under matplotlib_inline's name, with its InlineBackend configuration made at
    once, as ipykernel has it when the backend loads. Code that sets
    `InlineBackend.instance().figure_formats`, and `%config InlineBackend...`, reach it."""
    for name in STAND_IN_NAMES:
        setattr(module, name, globals()[name])
    module.InlineBackend = _inline_backend_class()
    shell = current.session.shell if current.session is not None else None
    # With the shell as its parent it takes what a %config run before matplotlib left in the
    # shell's configuration.
    _Config.instance = module.InlineBackend.instance(parent=shell)
    figures.select_formats(_Config.instance.figure_formats,
                           **_Config.instance.print_figure_kwargs)
    if shell is not None:
        add_config_to(shell)


def add_config_to(shell):
    """Let `%config InlineBackend...` reach the configuration (for a shell made after it)."""
    if _Config.instance is not None and _Config.instance not in shell.configurables:
        shell.configurables.append(_Config.instance)


def _inline_backend_class():
    """matplotlib_inline's InlineBackend, whose formats are the session's (figures.py). Its
    `shell` trait names an IPython class, which traitlets imports when an instance is made:
    here it is a plain value, so making the configuration does not load IPython."""
    from matplotlib_inline import config
    from traitlets import Any, observe

    class InlineBackend(config.InlineBackend):
        shell = Any(None, allow_none=True)

        @observe("figure_formats", "print_figure_kwargs")
        def _select_formats(self, change):
            figures.select_formats(self.figure_formats, **self.print_figure_kwargs)

    return InlineBackend


def _register_with_session():
    if current.session is not None:
        current.session.add_post_cell_hook(flush_figures)


matplotlib.interactive(True)  # pyplot then reports drawing, so cells show their figures
_register_with_session()
