"""The worker's InteractiveShell: IPython's shell with its output, errors, payloads and pager
sent as the session's frames, and `%matplotlib`, `%gui` and `!cmd` as the sandbox allows them.

Imported only once IPython is (ipython_bridge.create_shell, from the session's import hook):
this module imports IPython at its top, so a session that never uses IPython never loads it.
The shell reaches the session only through `worker_session`, given when it is made: the
display publisher and display hook IPython makes for it find the session there. What the shell
may ask of the session is what is called below: publish_display, clear_output, report_error,
write_payload, parents (output_parents.py), route_output_by_parent and streams.

The threat it answers: a cell's IPython must not reach past the session. A toolkit's event
loop or a GUI backend needs a display the sandbox has not got (refused, with the reason), and
`!cmd` writes to the worker's own fd 1 and fd 2, the pipes the supervisor reads and charges.
"""
import os
import sys

from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets import Any, Type

from . import current


class BelljarDisplayPublisher(DisplayPublisher):
    def publish(self, data, metadata=None, source=None, *, transient=None, update=False,
                **kwargs):
        self.shell.worker_session.publish_display(data, metadata or {}, transient, update)

    def clear_output(self, wait=False):
        self.shell.worker_session.clear_output(wait)


class BelljarDisplayHook(DisplayHook):
    """Only used when IPython runs a cell itself (e.g. %%capture): values become display
    frames instead of 'Out[n]:' text."""

    def write_output_prompt(self):
        pass

    def write_format_data(self, format_dict, md_dict=None):
        self.shell.worker_session.publish_display(format_dict, md_dict or {}, None, False)

    def finish_displayhook(self):
        pass


class BelljarShell(InteractiveShell):
    display_pub_class = Type(BelljarDisplayPublisher)
    displayhook_class = Type(BelljarDisplayHook)
    # The session the shell serves (session.py), given to instance(): set before IPython makes
    # the display publisher and hook, which reach it through the shell.
    worker_session = Any(None, allow_none=True)

    def system(self, cmd):
        """!cmd: the command writes straight to the worker's fd 1 and fd 2."""
        import subprocess
        cmd = self.var_expand(cmd, depth=1)
        self.worker_session.streams.sync_for_direct_output()
        shell = os.environ.get("SHELL") or None
        status = subprocess.call(cmd, shell=True, executable=shell)  # KeyboardInterrupt ends the cell
        self.user_ns["_exit_code"] = -(status - 128) if status > 128 else status

    def _showtraceback(self, etype, evalue, stb):
        # Every traceback IPython shows itself (showtraceback: called by the cell, by
        # %run, by a formatter that raised) comes here, not only a magic's.
        self.worker_session.report_error({"ename": etype.__name__, "evalue": str(evalue),
                                          "traceback": list(stb)})  # one entry a frame, as IPython's

    # ipykernel's shell API for where output goes (output_parents.py): get_parent() in a
    # cell, then set_parent/set_thread_parent in a thread, sends its output to that cell.
    def get_parent(self):
        return self.worker_session.parents.parent_message()

    def set_parent(self, parent):
        self.worker_session.parents.name(parent)
        self.worker_session.route_output_by_parent()

    def set_thread_parent(self, parent):
        token = self.worker_session.parents.name(parent)
        self.worker_session.route_output_by_parent()
        return token

    def reset_thread_parent(self, token):
        self.worker_session.parents.unname(token)

    def show_usage_error(self, exc):
        self.worker_session.report_error({"ename": "UsageError", "evalue": str(exc),
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
        self.worker_session.write_payload({"source": "set_next_input", "text": text,
                                           "replace": bool(replace)})

    def ask_exit(self):
        self.worker_session.write_payload({"source": "ask_exit", "keepkernel": False})

    def cell_event(self, cell, when):
        """IPython's pre/post execute events ("pre" or "post" the cell `cell`, a CellContext),
        for extensions such as autoreload. (IPython reports errors of the callbacks itself;
        ours must not fail the cell.)"""
        if cell.execution_count is not None:
            self.execution_count = cell.execution_count
        self.events.trigger("pre_execute" if when == "pre" else "post_execute")
        if cell.silent:
            return
        try:
            from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult
            info = ExecutionInfo(cell.code, cell.store_history, cell.silent, True, None)
        except Exception:  # another IPython version's signature: skip the cell events
            return
        if when == "pre":
            self.events.trigger("pre_run_cell", info)
        else:
            result = ExecutionResult(info)
            result.error_in_exec = sys.last_value if cell.failed else None
            self.events.trigger("post_run_cell", result)

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
