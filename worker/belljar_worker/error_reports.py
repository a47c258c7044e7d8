"""The errors of what the session runs, as `error` frames or as a comm request's stderr: an
exception that ends a cell, a traceback IPython showed itself, a repr method that raised while
the worker formatted a value, a comm handler that raised.

It decides only whether an error fails the request being served: a cell's own exception does;
a traceback shown while the cell's value is formatted does (ipykernel's displayhook); any other
shown traceback does not (the cell goes on, as under ipykernel 7); a comm handler's error fails
its comm request (comm_requests.py), or the cell that called the handler. The traceback's
layout is tracebacks.py's; sys.last_* are set as Python's own REPL sets them (%debug, %tb).
"""
import sys

from . import tracebacks


class ErrorReports:
    def __init__(self, channel, cell_labels, cell, comm_requests):
        self._channel, self._labels = channel, cell_labels
        self._cell = cell  # () -> the CellContext being served, or None
        self._comms = comm_requests
        # While the cell's own value is formatted: a formatter that raises then fails the
        # cell (ipykernel's displayhook); anywhere else its error is shown and the cell goes on.
        self.formatting_result = False

    def cell_raised(self, exc):
        """exc ended what the cell ran (its code, a post-cell hook, user_expressions)."""
        cell = self._cell()
        if cell is not None:
            cell.failed = True
        _keep_last(exc)
        self._channel.send(dict(type="error", **self._content(exc)))

    def shown(self, content):
        """An error that IPython caught and showed itself (showtraceback: called by the
        cell, by %run, by a formatter that raised, by a widget's callback). As under
        ipykernel 7 it is shown and the cell goes on, unless the cell's own value failed to
        format."""
        if self._cell() is None and self._comms.serving:
            self._comms.handler_failed(content.get("traceback") or [])
            return
        fails_cell = self.formatting_result
        cell = self._cell()
        if fails_cell and cell is not None:
            cell.failed = True
        self._channel.send(dict(type="error", fails_cell=fails_cell, **content))

    def format_failed(self, obj, method_name, exc):
        """A repr method raised while the worker formatted obj itself (no IPython yet):
        its traceback is shown as IPython's formatter shows it, and that format is skipped."""
        self.shown(self._content(exc))

    def handler_raised(self, exc):
        """A comm target or callback raised: an error of the cell when a cell called it,
        else its traceback on stderr, shown parented to the comm message."""
        if self._cell() is not None or not self._comms.serving:
            self.cell_raised(exc)
            return
        self._comms.note_interrupt(exc)
        _keep_last(exc)
        self._comms.handler_failed(self._content(exc)["traceback"])

    def _content(self, exc):
        try:
            return tracebacks.error_content(exc, self._labels)
        except Exception:
            return tracebacks.simple_error(type(exc).__name__, tracebacks.safe_str(exc))


def _keep_last(exc):
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, exc.__traceback__
