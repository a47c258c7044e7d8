"""JupyterLab's debugger, with the debuggee inside the sandbox (docs/design/debugger.md).

A session whose Python has debugpy serves the supervisor's debug requests on fd 4 from the
thread that flushes its output, while it waits between flushes (adapter.py, streams.py);
nothing of debugpy is imported until the user turns the debugger on. Cells are compiled under the file names JupyterLab computes for them
(cell_files.py), so breakpoints set in its gutter are found.
"""
import os
import sys


def available():
    """Whether this Python can debug: debugpy is on sys.path. Looked for by hand, without
    importing it or building the import system's path caches (that took 4 ms before hello)."""
    for entry in sys.path:
        if entry and os.path.isfile(os.path.join(entry, "debugpy", "__init__.py")):
            return True
    return False


def start(streams, session_ref):
    """Serve fd 4 from the thread that flushes the streams, between its flushes; the Debugger.
    No thread of its own: pydevd is told of that one when it starts (adapter.py), and what pydevd
    needs is imported only then."""
    # Imported here, on the main thread: the first import of threading takes the thread it runs
    # in for the main thread, and pydevd (imported later, on the flusher's) relies on it.
    import threading  # noqa: F401

    from .adapter import Debugger
    from .cell_files import CellFiles
    from .debug_channel import DebugChannel

    debugger = Debugger(DebugChannel(streams), CellFiles(), session_ref)
    streams.between_flushes = debugger.serve_for
    return debugger
