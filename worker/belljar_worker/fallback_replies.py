"""The answer to a request the worker failed to serve itself (a bug of ours, an interrupt that
landed in the worker's own bookkeeping, user code that broke it): every request is answered,
so the frontend never waits for a reply that will not come (worker/PROTOCOL.md).

A written table, one row per request kind the session serves: an execute ends in an error and
its `done`, a comm request in `done` with status error, the others in an empty reply. A kind
not in the table gets nothing, as the session has no handler for it.
"""
from . import tracebacks


def _execute(msg, exc):
    error = tracebacks.simple_error(type(exc).__name__, tracebacks.safe_str(exc))
    return [dict(type="error", **error),
            {"type": "done", "id": msg.get("id"), "status": "error", "user_expressions": {},
             "payload": []}]


def _complete(msg, exc):
    pos = msg.get("cursor_pos") or 0
    return [{"type": "complete_reply", "id": msg.get("id"), "matches": [],
             "cursor_start": pos, "cursor_end": pos, "metadata": {}}]


def _inspect(msg, exc):
    return [{"type": "inspect_reply", "id": msg.get("id"), "found": False, "data": {},
             "metadata": {}}]


def _is_complete(msg, exc):
    return [{"type": "is_complete_reply", "id": msg.get("id"), "status": "unknown",
             "indent": ""}]


def _comm(msg, exc):
    return [{"type": "done", "id": msg.get("id"), "status": "error"}]


def _comm_info(msg, exc):
    return [{"type": "comm_info_reply", "id": msg.get("id"), "comms": {}}]


FALLBACKS = {"execute": _execute, "complete": _complete, "inspect": _inspect,
             "is_complete": _is_complete, "comm": _comm, "comm_info": _comm_info}


def fallback_frames(msg, exc):
    """The frames that answer msg, whose handler raised exc."""
    answer = FALLBACKS.get(msg.get("type"))
    return answer(msg, exc) if answer is not None else []
