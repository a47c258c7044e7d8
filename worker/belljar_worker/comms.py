"""Comms: the Jupyter comm protocol inside the worker, spoken over frames.

A comm is a pair of objects, one in the frontend and one here, that send each other JSON
messages with binary buffers (every widget library stands on them). Either side opens one:
the worker with `Comm(target_name=...)`, which the frontend answers from its targets; the
frontend with comm_open, which reaches the target a cell registered with
`CommManager.register_target`. This module is what libraries reach through the `comm`
package's hooks (`create_comm`, `get_comm_manager`), ipykernel's `ipykernel.comm.Comm` (see
ipykernel_stand_in) and `get_ipython().kernel.comm_manager` (see ipython_bridge).

Frames (../PROTOCOL.md): the supervisor's `comm` requests carry the frontend's messages,
buffers in base64; the worker's `comm_open`, `comm_msg` and `comm_close` frames are published
on iopub, parented to the request being served. Handlers are user code: they may raise, print,
display or hang (SIGINT reaches them), and every request still ends with `done`. What the
worker sends is untrusted by the supervisor, which validates, caps and budgets it; here a
message too large for one frame is refused to the caller rather than cut.

Nothing here is imported at start-up: a session that never uses a comm never loads it.
"""
import os
import sys

from . import current

PROTOCOL_VERSION = "5.3"

# Targets a widget frontend opens when it connects, and the library whose import registers them:
# Notebook 6's widget extension checks ipywidgets' version on jupyter.widget.version, and
# JupyterLab's asks ipywidgets 8 for its live models on jupyter.widget.control.
_LIBRARY_TARGETS = {"jupyter.widget.version": "ipywidgets", "jupyter.widget.control": "ipywidgets"}


class Comm:
    """One end of a comm, with the API of ipykernel's Comm and the comm package's BaseComm.

    primary=True (the default) opens the frontend's end at once; the manager creates the
    non-primary ends of comms the frontend opened."""

    def __init__(self, target_name="comm", data=None, metadata=None, buffers=None,
                 comm_id=None, primary=True, target_module=None, topic=None,
                 _open_data=None, _close_data=None, **kwargs):
        # kwargs: ipykernel's traitlets options (kernel=, parent=, log=) mean nothing here.
        self._closed = True
        self.comm_id = str(comm_id) if comm_id else os.urandom(16).hex()
        self.primary = bool(primary)
        self.target_name = target_name or "comm"
        self.target_module = target_module
        self.topic = topic or ("comm-%s" % self.comm_id).encode("ascii", "replace")
        self._open_data = _open_data or {}
        self._close_data = _close_data or {}
        self._msg_callback = None
        self._close_callback = None
        # None outside the worker (a plain interpreter): like ipykernel without a kernel,
        # the comm then never opens and sends nothing.
        self.kernel = kernel()
        if self.kernel is not None:
            if self.primary:
                self.open(data=data, metadata=metadata, buffers=buffers)
            else:
                self._closed = False

    def __repr__(self):
        return "<%s %s target=%r%s>" % (type(self).__name__, self.comm_id, self.target_name,
                                       " closed" if self._closed else "")

    def __del__(self):
        # A finalizer may run in the middle of a frame write, whose lock is not reentrant:
        # nothing is sent from here. (An open comm is held by the manager, so only a comm
        # that was never registered gets here open.)
        try:
            self._closed = True
        except Exception:
            pass

    # -- to the frontend ---------------------------------------------------------------
    def open(self, data=None, metadata=None, buffers=None):
        """Open the frontend's end of this comm (comm_open to its target_name)."""
        if data is None:
            data = self._open_data
        manager = get_comm_manager()
        manager.register_comm(self)
        try:
            self._publish("comm_open", data, metadata, buffers, target_name=self.target_name,
                          target_module=self.target_module)
            self._closed = False
        except BaseException:
            manager.unregister_comm(self)
            raise

    def send(self, data=None, metadata=None, buffers=None):
        """Send a comm_msg to the frontend's end (nothing once the comm is closed)."""
        if not self._closed:
            self._publish("comm_msg", data, metadata, buffers)

    def close(self, data=None, metadata=None, buffers=None, deleting=False):
        """Close both ends; only the first call sends comm_close."""
        if self._closed:
            return
        self._closed = True
        if self.kernel is None:
            return
        if data is None:
            data = self._close_data
        try:
            self._publish("comm_close", data, metadata, buffers)
        finally:
            if not deleting:
                get_comm_manager().unregister_comm(self)

    def _publish(self, kind, data, metadata, buffers, **keys):
        session = current.session
        if session is None:
            return
        frame = {"type": kind, "comm_id": self.comm_id,
                 "data": {} if data is None else data,
                 "metadata": {} if metadata is None else metadata}
        frame.update(keys)
        if buffers:
            frame["buffers"] = [_base64(buffer) for buffer in buffers]
        session.channel.send(frame, strict=True)

    # -- from the frontend -------------------------------------------------------------
    def on_msg(self, callback):
        """callback(msg) for each comm_msg from the frontend; None removes it."""
        self._msg_callback = callback

    def on_close(self, callback):
        """callback(msg) when the frontend closes the comm; None removes it."""
        self._close_callback = callback

    def handle_msg(self, msg):
        if self._msg_callback is None:
            return
        # As ipykernel: IPython's execute events around the callback (autoreload, ...).
        shell = _shell()
        if shell is not None:
            shell.events.trigger("pre_execute")
        self._msg_callback(msg)
        if shell is not None:
            shell.events.trigger("post_execute")

    def handle_close(self, msg):
        if self._close_callback is not None:
            self._close_callback(msg)


class CommManager:
    """The live comms (either side opened, not yet closed) and the targets cells registered."""

    def __init__(self):
        self.comms = {}    # comm_id -> Comm
        self.targets = {}  # target_name -> callable(comm, msg)

    def register_target(self, target_name, f):
        """f(comm, msg) is called for each comm the frontend opens to target_name; f may be
        an import string ("module.function")."""
        if isinstance(f, str):
            f = _import_item(f)
        self.targets[target_name] = f

    def unregister_target(self, target_name, f=None):
        return self.targets.pop(target_name, None)

    def register_comm(self, comm):
        self.comms[comm.comm_id] = comm
        return comm.comm_id

    def unregister_comm(self, comm):
        self.comms.pop(comm.comm_id, None)

    def get_comm(self, comm_id):
        return self.comms.get(comm_id)

    def comm_info(self, target_name=None):
        """{comm_id: {"target_name": ...}} of the live comms, of one target when given."""
        return {comm_id: {"target_name": comm.target_name}
                for comm_id, comm in list(self.comms.items())
                if target_name is None or comm.target_name == target_name}

    # The frontend's messages, with ipykernel's signatures (stream and ident are unused).
    def comm_open(self, stream, ident, msg):
        content = msg["content"]
        target_name = content.get("target_name")
        comm = Comm(comm_id=content["comm_id"], primary=False, target_name=target_name)
        self.register_comm(comm)
        handler = self.targets.get(target_name) or self._library_target(target_name)
        if handler is not None:
            try:
                handler(comm, msg)
                return
            except BaseException as exc:
                _report_handler_error(exc)
        # No such target, or it failed: close the frontend's end, as ipykernel does.
        comm.close()

    def _library_target(self, target_name):
        """The handler of a target that a widget frontend opens as soon as it connects, before
        any cell imported the library that registers it: the library is imported now (it
        registers its targets on import), else Notebook 6's version check fails and the first
        widget shows "Widget Javascript not detected". None when there is no such library."""
        library = _LIBRARY_TARGETS.get(target_name)
        if library is None or library in sys.modules:
            return None
        import importlib
        import importlib.util
        try:
            if importlib.util.find_spec(library) is None:
                return None
            importlib.import_module(library)
        except Exception:
            return None  # the cell that imports it shows why, with its traceback
        return self.targets.get(target_name)

    def comm_msg(self, stream, ident, msg):
        comm = self.get_comm(msg["content"]["comm_id"])
        if comm is None:
            return  # closed meanwhile, or never opened: ipykernel ignores it too
        try:
            comm.handle_msg(msg)
        except BaseException as exc:
            _report_handler_error(exc)

    def comm_close(self, stream, ident, msg):
        comm_id = msg["content"]["comm_id"]
        comm = self.comms.pop(comm_id, None)
        if comm is None:
            return
        comm._closed = True
        try:
            comm.handle_close(msg)
        except BaseException as exc:
            _report_handler_error(exc)


class WorkerKernel:
    """What widget libraries reach as `get_ipython().kernel`: its comm manager and the header
    of the request being served (the Output widget routes output by its msg_id)."""

    implementation = "belljar"

    def __init__(self, manager):
        self.comm_manager = manager

    @property
    def shell(self):
        return _shell()

    def get_parent(self, channel="shell"):
        return current.session.parents.parent_message()

    @property
    def _parent_header(self):
        return self.get_parent()


# -- the worker's one manager, and the comm package's hooks -------------------------------
_manager = None
_kernel = None


def get_comm_manager():
    global _manager
    if _manager is None:
        _manager = CommManager()
    return _manager


def create_comm(*args, **kwargs):
    return Comm(*args, **kwargs)


def kernel():
    """The kernel object libraries see, or None outside the worker."""
    global _kernel
    if current.session is None:
        return None
    if _kernel is None:
        _kernel = WorkerKernel(get_comm_manager())
    return _kernel


def hook_comm_package(module):
    """The `comm` package was imported: its comms are the worker's."""
    module.create_comm = create_comm
    module.get_comm_manager = get_comm_manager


def comm_info(target_name=None):
    return get_comm_manager().comm_info(target_name)


def serve_request(frame):
    """One `comm` request of the supervisor: the frontend's comm_open, comm_msg or comm_close
    reaches the target or comm it names. Handler failures are reported, not raised."""
    msg = _jupyter_message(frame)
    manager = get_comm_manager()
    handler = {"comm_open": manager.comm_open, "comm_msg": manager.comm_msg,
               "comm_close": manager.comm_close}.get(msg["msg_type"])
    if handler is None:
        raise ValueError("comm request with unknown msg_type %r" % (msg["msg_type"],))
    handler(None, None, msg)


def _jupyter_message(frame):
    """The frontend's message as ipykernel hands it to targets and callbacks; buffers are
    memoryviews, as ipykernel's are (widget libraries call .tobytes() on them)."""
    import binascii
    kind = frame.get("msg_type")
    content = frame.get("content")
    if not isinstance(content, dict) or not isinstance(content.get("comm_id"), str):
        raise ValueError("comm request without a content.comm_id")
    if kind in ("comm_msg", "comm_close") and not isinstance(content.get("data"), dict):
        content["data"] = {}
    metadata = frame.get("metadata")
    buffers = frame.get("buffers") or []
    if not isinstance(buffers, list):
        raise ValueError("comm request whose buffers are not a list")
    msg_id = frame.get("msg_id") if isinstance(frame.get("msg_id"), str) else ""
    return {"header": {"msg_id": msg_id, "msg_type": kind, "version": PROTOCOL_VERSION},
            "msg_id": msg_id, "msg_type": kind, "parent_header": {},
            "metadata": metadata if isinstance(metadata, dict) else {},
            "content": content,
            "buffers": [memoryview(binascii.a2b_base64(b)) for b in buffers]}


def _base64(buffer):
    import binascii
    return binascii.b2a_base64(memoryview(buffer).tobytes(), newline=False).decode("ascii")


def _report_handler_error(exc):
    session = current.session
    if session is not None:
        session.report_handler_error(exc)
        return
    import traceback
    traceback.print_exception(type(exc), exc, exc.__traceback__)


def _shell():
    session = current.session
    return getattr(session, "shell", None)


def _import_item(name):
    import importlib
    module, _, attribute = name.rpartition(".")
    if not module:
        return importlib.import_module(name)
    return getattr(importlib.import_module(module), attribute)


def widget_text(view):
    """text/plain for a widget view bundle that has none (ipywidgets 6 sends only the view):
    what a frontend without the widget extension shows, e.g. `IntSlider(value=5)`."""
    model_id = view.get("model_id") if isinstance(view, dict) else None
    widgets = getattr(getattr(sys.modules.get("ipywidgets"), "Widget", None), "widgets", None)
    widget = widgets.get(model_id) if isinstance(widgets, dict) else None
    if widget is None:
        return "A Jupyter widget"
    name = type(widget).__name__
    try:
        if "value" in widget.keys:
            return "%s(value=%r)" % (name, widget.value)
    except Exception:
        pass
    return "%s()" % name
