"""IPython, only for sessions that use it.

Two ways in: a cell with IPython syntax (%magic, %%cell magic, !cmd, obj?) makes the session
transform its cells with IPython from then on; and user code importing IPython (e.g.
IPython.display) gets a live InteractiveShell at once, sharing the session's namespace,
whose display publisher and display hook send our frames, and whose `kernel` is the
worker's comms (what ipywidgets registers its targets with). Cells still run through the
worker's own runner either way, so results, errors and streams behave the same.
"""
import os
import sys

from . import current

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
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets import Type
    from traitlets.config import Config

    class BelljarDisplayPublisher(DisplayPublisher):
        def publish(self, data, metadata=None, source=None, *, transient=None, update=False,
                    **kwargs):
            session.publish_display(data, metadata or {}, transient, update)

        def clear_output(self, wait=False):
            session.clear_output(wait)

    class BelljarDisplayHook(DisplayHook):
        """Only used when IPython runs a cell itself (e.g. %%capture): values become
        display frames instead of 'Out[n]:' text."""

        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            session.publish_display(format_dict, md_dict or {}, None, False)

        def finish_displayhook(self):
            pass

    class BelljarShell(InteractiveShell):
        display_pub_class = Type(BelljarDisplayPublisher)
        displayhook_class = Type(BelljarDisplayHook)

        def system(self, cmd):
            """!cmd: the command writes straight to the worker's fd 1 and fd 2."""
            import subprocess
            cmd = self.var_expand(cmd, depth=1)
            session.streams.sync_for_direct_output()
            shell = os.environ.get("SHELL") or None
            status = subprocess.call(cmd, shell=True, executable=shell)  # KeyboardInterrupt ends the cell
            self.user_ns["_exit_code"] = -(status - 128) if status > 128 else status

        def _showtraceback(self, etype, evalue, stb):
            # Every traceback IPython shows itself (showtraceback: called by the cell, by
            # %run, by a formatter that raised) comes here, not only a magic's.
            session.report_error({"ename": etype.__name__, "evalue": str(evalue),
                                  "traceback": list(stb)})  # one entry a frame, as IPython's

        # ipykernel's shell API for where output goes (output_parents.py): get_parent() in a
        # cell, then set_parent/set_thread_parent in a thread, sends its output to that cell.
        def get_parent(self):
            return session.parents.parent_message()

        def set_parent(self, parent):
            session.parents.name(parent)
            session.route_output_by_parent()

        def set_thread_parent(self, parent):
            token = session.parents.name(parent)
            session.route_output_by_parent()
            return token

        def reset_thread_parent(self, token):
            session.parents.unname(token)

        def show_usage_error(self, exc):
            session.report_error({"ename": "UsageError", "evalue": str(exc),
                                  "traceback": ["\x1b[0;31mUsageError\x1b[0m: %s" % exc]})

        def enable_matplotlib(self, gui=None):
            """%matplotlib: figures can only be shown inline, through the worker's backend."""
            from IPython.core import pylabtools
            if gui not in (None, "auto", "inline", "agg"):
                raise UsageError("belljar shows figures inline only; %%matplotlib %s needs a "
                                 "GUI or widget frontend" % gui)
            backend = current.inline_backend()
            if gui == "inline" and backend == current.MATPLOTLIB_INLINE_BACKEND:
                # What IPython calls it: "inline" where matplotlib keeps a registry of
                # backends (IPython 9, matplotlib 3.9), which then reports that name.
                try:
                    named = pylabtools.find_gui_and_backend("inline")[1]
                except Exception:
                    named = None
                if named in ("inline", current.MATPLOTLIB_INLINE_BACKEND):
                    backend = named
            pylabtools.activate_matplotlib(backend)
            return "inline", backend

        @property
        def kernel(self):
            """What widget libraries reach for (ipywidgets: kernel.comm_manager, and the
            Output widget's kernel._parent_header): the worker's comms, loaded on first use."""
            from .comms import kernel
            return kernel()

        def set_next_input(self, text, replace=False):
            """%load, %recall: the text goes to the frontend's next cell (a payload), as
            ipykernel's shell sends it, rather than to a readline buffer no one reads."""
            session.write_payload({"source": "set_next_input", "text": text,
                                   "replace": bool(replace)})

        def ask_exit(self):
            session.write_payload({"source": "ask_exit", "keepkernel": False})

        def enable_gui(self, gui=None):
            """%gui asyncio, as ipykernel: the session's asyncio loop, which runs between cells
            anyway (event_loop.py). A toolkit's loop (qt, tk, ...) needs a display the sandbox
            does not have."""
            if gui == "asyncio":
                from .event_loop import session_loop
                session_loop()
            elif gui not in (None, "inline"):
                raise UsageError("belljar runs no GUI toolkit's event loop (%%gui %s): the sandbox "
                                 "has no display. %%gui asyncio is supported: the session's "
                                 "asyncio loop runs between cells" % gui)
            self.active_eventloop = gui if gui == "asyncio" else None

    config = Config()
    config.HistoryManager.enabled = False  # history lives in the supervisor
    config.HistoryManager.hist_file = ":memory:"
    namespace = session.namespace
    before = dict(namespace)
    shell = BelljarShell.instance(config=config, user_module=session.main_module)
    # IPython fills the namespace with its own In/Out/_/exit...: keep the session's.
    for name, value in before.items():
        if namespace.get(name, value) is not value:
            namespace[name] = value
    for name in ("exit", "quit"):
        if name not in before:
            namespace.pop(name, None)  # the builtins, which end the cell with SystemExit
    namespace["_ih"], namespace["_oh"] = namespace["In"], namespace["Out"]
    for name in session.SESSION_NAMES:  # not the user's: hidden from %who
        if name in namespace:
            shell.user_ns_hidden[name] = namespace[name]
    shell.set_hook("show_in_pager", page.as_hook(payloadpage.page), 99)
    _name_cells_in_tracebacks(shell, session.cell_labels)
    shell.loop_runner = session.runner.run_coroutine
    # matplotlib_inline's configuration, when the inline backend came before IPython.
    inline_backend = sys.modules.get(__package__ + ".inline_backend")
    if inline_backend is not None:
        inline_backend.add_config_to(shell)
    # Figures in the formats the session selected (figures.py), whichever formatter runs.
    import functools

    from .figures import FIGURE_MIMES
    for mime in FIGURE_MIMES:
        shell.display_formatter.formatters[mime].for_type_by_name(
            "matplotlib.figure", "Figure", functools.partial(_figure_data, mime))
    return shell


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
