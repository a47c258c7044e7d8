"""JupyterLab's debugger, with the debuggee inside the sandbox (docs/design/debugger.md).

A session whose Python has debugpy starts one thread at start-up that waits on fd 4 for
the supervisor's debug requests (adapter.py); nothing of debugpy is imported until the user
turns the debugger on. Cells are compiled under the file names JupyterLab computes for them
(cell_files.py), so breakpoints set in its gutter are found.
"""
import importlib.machinery


def available():
    """Whether this Python can debug: debugpy is importable (found without importing it)."""
    try:
        return importlib.machinery.PathFinder.find_spec("debugpy") is not None
    except Exception:
        return False


def start(streams, session_ref):
    """Start serving fd 4 on a thread of belljar's own; the Debugger."""
    import _thread
    import threading

    from .adapter import Debugger
    from .cell_files import CellFiles
    from .debug_channel import DebugChannel
    from .pydevd_link import mark_not_traced

    debugger = Debugger(DebugChannel(streams), CellFiles(), session_ref)

    def serve():
        mark_not_traced()
        debugger.serve()

    size = _thread.stack_size(256 << 10)  # little address space under an address-space limit
    try:
        thread = threading.Thread(target=serve, name="belljar-debug", daemon=True)
        mark_not_traced(thread)
        thread.start()
    finally:
        _thread.stack_size(size)
    return debugger
