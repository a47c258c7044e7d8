"""The supervisor's comm requests: the frontend's comm_open, comm_msg and comm_close, each
served like a small cell (what its handler prints or displays is its output, `done` always ends
it), comm_info, and the comm messages handed during a cell that awaits (event_loop.run_cell),
served between its steps (worker/PROTOCOL.md, "Comms during a cell").

It owns the comm request's status (ok until a handler fails) and, during a cell, whether an
interrupt landed in the handler: that interrupt was meant for the cell, which gets it once the
handler is done. Of the session it touches only what is listed in CommRequests' docstring.
The comms themselves (targets, Comm objects) are comms.py's, loaded on the first comm request:
a session that never uses a comm never loads it.
"""
import sys


def _serve_with_comms(msg):
    from . import comms
    comms.serve_request(msg)


class CommRequests:
    """channel: send, take_comms, request_id; gate: enter_user_code, leave_user_code,
    in_user_code; streams: reopen_if_closed, flush, stderr. Of the session: post_cell_hooks
    (read), report_handler_error and recover (called), and while a handler runs during a cell,
    ctx and parent_msg_id (set aside, then put back). serve: one comm message to its handler
    (comms.serve_request)."""

    def __init__(self, channel, gate, streams, session, serve=_serve_with_comms):
        self._channel, self._gate, self._streams = channel, gate, streams
        self._session = session
        self._serve = serve
        self.status = None        # while a comm request is served: "ok" or "error"
        self._interrupted = None  # while a handler runs during a cell: whether SIGINT hit it

    @property
    def serving(self):
        return self.status is not None

    def serve(self, msg, during_cell=False):
        """The frontend's comm_open, comm_msg or comm_close, handled like a small cell: what
        handlers print or display is this request's output; `done` always ends it."""
        self._streams.reopen_if_closed()
        self.status = "ok"
        try:
            self._gate.enter_user_code()
            try:
                self._serve(msg)
                # As ipykernel's post_execute: figures a handler drew are shown now (during a
                # cell, the cell's figures would go with them: they wait for its end).
                for hook in [] if during_cell else list(self._session.post_cell_hooks):
                    try:
                        hook()
                    except Exception as exc:
                        self._session.report_handler_error(exc)
            finally:
                self._gate.leave_user_code()
            status = self.status
        finally:
            self.status = None
        self._streams.flush()
        self._channel.send({"type": "done", "id": msg.get("id"), "status": status})

    def serve_during_cell(self, cell_id):
        """From the session's loop while the cell `cell_id` awaits (event_loop.run_cell): the
        comm messages the supervisor handed during it reach their handlers now, in order, each
        framed by `comm_begin` and its `done`; the cell then goes on where it awaited."""
        for frame in self._channel.take_comms(cell_id):
            self._serve_in_cell(frame)

    def _serve_in_cell(self, frame):
        channel, gate, session = self._channel, self._gate, self._session
        saved = (channel.request_id, session.parent_msg_id, session.ctx, gate.in_user_code)
        msg_id = frame.get("msg_id")
        interrupted = False
        try:
            # What the handler sends is the comm message's (its id), input() is refused (no
            # cell of its own), and it is served as a comm request, not as the cell.
            channel.request_id = frame.get("id")
            session.parent_msg_id = msg_id if isinstance(msg_id, str) else ""
            session.ctx, self._interrupted = None, False
            channel.send({"type": "comm_begin"})
            self.serve(frame, during_cell=True)
            interrupted = self._interrupted
        except BaseException as exc:
            gate.leave_user_code()
            session.recover(frame, exc)
            interrupted = isinstance(exc, KeyboardInterrupt)
        finally:
            self._interrupted = None
            channel.request_id, session.parent_msg_id, session.ctx = saved[:3]
            if saved[3]:
                gate.enter_user_code()
        if interrupted:
            raise KeyboardInterrupt  # the user's interrupt, or the cell's limit: the cell's

    def info(self, msg):
        """The live comms, of one target when target_name is given. (JupyterLab asks on
        every connection: a session that never opened a comm does not load comms for it.)"""
        target = msg.get("target_name")
        comms = sys.modules.get(__package__ + ".comms")
        live = comms.comm_info(target if isinstance(target, str) else None) if comms else {}
        self._channel.send({"type": "comm_info_reply", "id": msg.get("id"), "comms": live})

    def note_interrupt(self, exc):
        """A handler raised exc: an interrupt while it ran during a cell is the cell's."""
        if isinstance(exc, KeyboardInterrupt) and self._interrupted is not None:
            self._interrupted = True

    def handler_failed(self, lines):
        """A handler of this request failed (lines: its traceback): the request's status is
        error, and the traceback goes to stderr, parented to the comm message."""
        self.status = "error"
        try:
            self._streams.stderr.write("\n".join(str(line) for line in lines) + "\n")
        except Exception:
            pass
