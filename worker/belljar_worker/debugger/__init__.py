"""JupyterLab's debugger, with the debuggee inside the sandbox (docs/design/debugger.md).

A session whose Python has debugpy starts one thread at start-up that waits on fd 4 for
the supervisor's debug requests (adapter.py); nothing of debugpy is imported until the user
turns the debugger on. Cells are compiled under the file names JupyterLab computes for them
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
    """Start serving fd 4 on a thread of belljar's own; the Debugger. A bare thread (pydevd is
    told of it when it starts, adapter.py); what pydevd needs is imported only then."""
    import _thread

    # Imported here, on the main thread: the first import of threading takes the thread it runs
    # in for the main thread, and pydevd (imported later, on the debug thread) relies on it.
    import threading  # noqa: F401

    from .adapter import Debugger
    from .cell_files import CellFiles
    from .debug_channel import DebugChannel

    debugger = Debugger(DebugChannel(streams), CellFiles(), session_ref)
    size = _thread.stack_size(256 << 10)  # little address space under an address-space limit
    try:
        _thread.start_new_thread(debugger.serve, ())
    finally:
        _thread.stack_size(size)
    return debugger
