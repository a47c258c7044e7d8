"""IPython, only for sessions that use it.

Two ways in: a cell with IPython syntax (%magic, %%cell magic, !cmd, obj?) makes the session
transform its cells with IPython from then on; and user code importing IPython (e.g.
IPython.display) gets a live InteractiveShell at once (shell.py), sharing the session's
namespace, whose display publisher and display hook send our frames, and whose `kernel` is the
worker's comms (what ipywidgets registers its targets with). Cells still run through the
worker's own runner either way, so results, errors and streams behave the same.

Imported at start-up (the session asks looks_like_ipython of a cell that failed to parse):
nothing of IPython is imported here before create_shell is called.
"""
import sys

IPYTHON_MISSING = "magics need IPython, which is not installed in this interpreter"


def looks_like_ipython(source):
    """True when source uses IPython-only syntax (checked after it failed to parse)."""
    for line in source.splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text[0] in "%!?" or text.endswith("?"):
            return True
        target, eq, value = text.partition("=")
        if eq and target.strip() and target[-1:] not in "<>!=" and value[:1] != "=" \
                and value.lstrip()[:1] in ("%", "!"):
            return True  # x = %time f(), files = !ls
    return False


def create_shell(session):
    """An InteractiveShell singleton wired to the session (IPython is importable here)."""
    from IPython.core import page, payloadpage
    from traitlets.config import Config

    from .shell import BelljarShell

    config = Config()
    config.HistoryManager.enabled = False  # history lives in the supervisor
    config.HistoryManager.hist_file = ":memory:"
    before = dict(session.namespace)
    shell = BelljarShell.instance(config=config, user_module=session.main_module,
                                  worker_session=session)
    _keep_session_names(shell, session, before)
    shell.set_hook("show_in_pager", page.as_hook(payloadpage.page), 99)
    _name_cells_in_tracebacks(shell, session.cell_labels)
    shell.loop_runner = session.runner.run_coroutine
    # matplotlib_inline's configuration, when the inline backend came before IPython.
    inline_backend = sys.modules.get(__package__ + ".inline_backend")
    if inline_backend is not None:
        inline_backend.add_config_to(shell)
    _format_figures(shell)
    return shell


def _keep_session_names(shell, session, before):
    """IPython fills the namespace with its own In/Out/_/exit...: the session's stay, and are
    the shell's hidden names (not the user's: %who leaves them out)."""
    namespace = session.namespace
    for name, value in before.items():
        if namespace.get(name, value) is not value:
            namespace[name] = value
    for name in ("exit", "quit"):
        if name not in before:
            namespace.pop(name, None)  # the builtins, which end the cell with SystemExit
    namespace["_ih"], namespace["_oh"] = namespace["In"], namespace["Out"]
    for name in session.SESSION_NAMES:
        if name in namespace:
            shell.user_ns_hidden[name] = namespace[name]


def _format_figures(shell):
    """Figures in the formats the session selected (figures.py), whichever formatter runs."""
    import functools

    from .figures import FIGURE_MIMES
    for mime in FIGURE_MIMES:
        shell.display_formatter.formatters[mime].for_type_by_name(
            "matplotlib.figure", "Figure", functools.partial(_figure_data, mime))


def _name_cells_in_tracebacks(shell, cell_labels):
    """IPython's tracebacks (showtraceback, %tb, %debug's listing) call a cell's code
    "Cell In[N]" when its compiler knows the code's filename; the session compiles cells
    itself, so it is told of them, those run before IPython was loaded included."""
    compiler = shell.compile
    named_by_ipython = getattr(compiler, "format_code_name", None)
    if named_by_ipython is None:  # an IPython before 8: its own names stand
        return

    def format_code_name(name):
        label = cell_labels.get(name)
        return ("Cell", label) if label is not None else named_by_ipython(name)
    compiler.format_code_name = format_code_name


def _figure_data(mime, figure):
    from .figures import figure_data
    return figure_data(figure, mime)


def check_complete(shell, code):
    status, indent = shell.input_transformer_manager.check_complete(code)
    return status, " " * (indent or 0)


def magic_names(shell):
    magics = shell.magics_manager.lsmagic()
    return (["%" + name for name in magics.get("line", {})],
            ["%%" + name for name in magics.get("cell", {})])
