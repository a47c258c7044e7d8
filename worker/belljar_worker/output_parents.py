"""Which request a write or a display belongs to, decided as ipykernel 7 decides it.

Each request the worker serves (a cell, a widget's comm message) becomes the parent in the main
thread's context. An asyncio task copies the context it was made in, so a task keeps the parent
of the cell that made it, whatever runs when it prints. A thread starts with an empty context:
its output goes with the request running when it writes (or the last cell), unless it names a
parent itself (get_ipython().set_parent / set_thread_parent, as ipykernel's shell offers).

Output is sent as the supervisor would parent it anyway (the request being served) unless its
context names another parent, or names one between requests: then it goes as frames naming it,
which the supervisor matches against the requests it handed over (worker/PROTOCOL.md). The
text of such a context is routed by ParentedStream, installed only once another parent can
exist (a parent was named, or tasks outlive the request that made them): print() in a session
without either pays nothing for it.
"""
import _thread
import contextvars
import sys

_parent = contextvars.ContextVar("belljar_output_parent", default=None)


class OutputParents:
    def __init__(self):
        # The request being served; None between requests, when the supervisor can't tell by
        # timing alone whether the pipes' text came before or after it handed over the next:
        # then every context with a parent names it.
        self.current = None
        self.last = None    # the last request served: what get_parent() gives a bare thread
        self.named = False  # code named a parent: ParentedStream is installed

    def serve(self, msg_id):
        """A request starts: the main thread's context (the cell's, a handler's) is its."""
        _parent.set(msg_id)
        self.current = self.last = msg_id

    def served(self):
        self.current = None

    def foreign(self):
        """The parent this context's output names, when it is not the one the supervisor
        would give it; None otherwise."""
        parent = _parent.get()
        return parent if parent and parent != self.current else None  # "": a request unnamed

    def parent_message(self):
        """get_ipython().get_parent(): the request this context's output goes to, shaped as
        the message ipykernel returns (what the worker knows of it: its msg_id)."""
        msg_id = _parent.get() or self.last or ""
        return {"header": {"msg_id": msg_id}, "msg_id": msg_id, "parent_header": {},
                "metadata": {}, "content": {}}

    def name(self, parent):
        """set_parent / set_thread_parent: this context's output goes to `parent` (a message
        from get_parent) from now on; the token undoes it."""
        token = _parent.set(_msg_id_of(parent))
        self.named = True
        return token

    @staticmethod
    def unname(token):
        _parent.reset(token)


def _msg_id_of(parent):
    if isinstance(parent, dict):
        header = parent.get("header")
        msg_id = header.get("msg_id") if isinstance(header, dict) else parent.get("msg_id")
        if isinstance(msg_id, str) and msg_id:
            return msg_id
    raise ValueError("a parent is a message from get_parent() (a dict with header.msg_id)")


class ParentedStream:
    """sys.stdout or sys.stderr once another parent can exist: text of a context that names
    another parent is kept per parent and sent as `stream` frames naming it (on a newline, a
    flush, or the worker's periodic flush); the rest goes on to the pipe as before."""

    def __init__(self, name, inner, parents, send):
        self._name, self._inner, self._parents, self._send = name, inner, parents, send
        self._pending = {}
        self._lock = _thread.allocate_lock()

    def write(self, text):
        parent = self._parents.foreign()
        if parent is None:
            return self._inner.write(text)
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        with self._lock:
            self._pending[parent] = self._pending.get(parent, "") + text
        if "\n" in text:
            self.flush_foreign()
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        self.flush_foreign()
        self._inner.flush()

    def flush_foreign(self):
        with self._lock:
            pending, self._pending = self._pending, {}
        for parent, text in pending.items():
            try:
                self._send({"type": "stream", "name": self._name, "text": text,
                            "parent": parent})
            except Exception:
                pass  # a frame that could not go: like a write to a closed pipe, nothing shown

    def __getattr__(self, name):  # encoding, fileno, isatty, buffer...: the pipe's
        return getattr(self._inner, name)


def route_streams(streams, parents, send):
    """Install ParentedStream over the worker's own streams (once): what the user put in
    their place stays."""
    for name in ("stdout", "stderr"):
        own = getattr(streams, name)
        if isinstance(own, ParentedStream):
            continue
        routed = ParentedStream(name, own, parents, send)
        setattr(streams, name, routed)
        if getattr(sys, name) is own:
            setattr(sys, name, routed)
        setattr(sys, "__%s__" % name, routed)
