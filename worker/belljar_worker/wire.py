"""Frames on fd 3: a 4-byte big-endian length, then that many bytes of UTF-8 JSON.

The JSON codec is built straight on the `_json` accelerator when it is there: importing the
`json` package pulls in `re` and `enum`, about a quarter of the worker's start-up time.
"""
import _thread
import os
import sys

MAX_FRAME = 64 * 1024 * 1024  # the supervisor treats anything larger as a fault
SIOCOUTQ = 0x5411  # Linux: bytes of ours that the peer of a unix socket has not read yet
READ_WAIT_LIMIT = 1.0  # seconds; past this, output may overtake an unread frame


class FrameTooLarge(ValueError):
    """A message that cannot travel as one frame, raised to the code that asked to send it."""


class _ScanContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo = None

    @staticmethod
    def parse_constant(name):
        raise ValueError("JSON constant %s is not allowed" % name)


def _json_default(obj):
    """Values that JSON has no type for: bytes become base64, everything else text."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        import binascii
        return binascii.b2a_base64(bytes(obj), newline=False).decode("ascii")
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    tolist = getattr(type(obj), "tolist", None)  # numpy scalars and arrays
    if tolist is not None:
        try:
            return tolist(obj)
        except Exception:
            pass
    try:
        return repr(obj)
    except Exception:
        return "<unrepresentable %s>" % type(obj).__name__


def _make_codec():
    try:
        import _json
        make_encoder, encode_str = _json.make_encoder, _json.encode_basestring
        scan = _json.make_scanner(_ScanContext())

        def dumps(obj):
            encoder = make_encoder({}, _json_default, encode_str, None, ":", ",",
                                   False, False, False)
            return "".join(encoder(obj, 0))

        def loads(text):
            text = text.strip()
            try:
                obj, end = scan(text, 0)
            except StopIteration:
                raise ValueError("not JSON") from None
            if end != len(text):
                raise ValueError("trailing data after JSON")
            return obj

        dumps({"probe": [1.5, None, True, "é"]})
        return dumps, loads
    except Exception:  # no accelerator (another implementation): the plain module
        import json

        def dumps(obj):
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False, default=_json_default)

        return dumps, json.loads


_dumps, _loads = _make_codec()


def _finite(obj):
    """A copy of obj with NaN and infinities replaced by None (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if obj - obj == 0.0 else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def encode(msg):
    """msg as frame payload bytes; never raises for odd user data inside msg."""
    try:
        text = _dumps(msg)
    except (ValueError, TypeError, RecursionError):
        try:
            text = _dumps(_finite(msg))
        except (ValueError, TypeError, RecursionError) as exc:
            text = _dumps({"type": msg.get("type", "error"), "data": {
                "text/plain": "<output could not be encoded as JSON: %s>" % exc}})
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from user strings
        return text.encode("utf-8", "replace")


def _too_big(msg, size):
    note = "<output of %d bytes dropped: larger than the %d MiB frame limit>" % (
        size, MAX_FRAME >> 20)
    kind = msg.get("type")
    if kind in ("display", "update_display", "result"):
        small = dict(msg, data={"text/plain": note}, metadata={})
    elif kind == "error":
        small = dict(msg, evalue=str(msg.get("evalue", ""))[:10000], traceback=[note])
    elif kind == "stream":
        small = dict(msg, text=note + "\n")
    elif kind == "done":
        small = dict(msg, user_expressions={}, payload=[])
    elif kind == "complete_reply":
        small = dict(msg, matches=msg.get("matches", [])[:1000], metadata={})
    elif kind == "inspect_reply":
        small = dict(msg, data={"text/plain": note}, metadata={})
    else:
        small = {k: v for k, v in msg.items() if k in ("type", "id", "written")}
    return encode(small)


class FrameChannel:
    def __init__(self, fd, gate, flush_streams, written=None):
        self.fd = fd
        self.gate = gate
        self.flush_streams = flush_streams
        self.written = written  # the streams' [fd 1, fd 2] byte counts (streams.py)
        self._inbox = bytearray()
        self._deferred = []  # frames read inside a cell, for after it (comms: at its awaits)
        # While a cell's top-level await runs the loop: called when a `comm` frame was put
        # aside, so the loop serves it at its next turn (event_loop.run_cell).
        self.comm_waiting = None
        self._write_lock = _thread.allocate_lock()
        self.main_thread = _thread.get_ident()
        self._frame_unread = False
        self._can_watch_reads = True
        # The id of the request being served (the supervisor's `id`): every frame carries it,
        # so the supervisor attributes a frame to the request the worker was serving when it
        # was sent, and drops it once that request is over. Set by the session per request;
        # None between requests, when frames say `idle` instead (a task or a thread's output).
        self.request_id = None

    # -- sending -----------------------------------------------------------------------
    def send(self, msg, strict=False):
        """Send msg as one frame. Too large for a frame: a shortened stand-in is sent instead,
        or, with strict=True (a comm message: a shortened one would be a lie to its peer),
        FrameTooLarge is raised and nothing is sent."""
        if "id" not in msg:
            if self.request_id is not None:
                msg = dict(msg, id=self.request_id)
            elif msg.get("type") != "hello":
                msg = dict(msg, idle=True)
        self.flush_streams()  # text printed before this frame must arrive before it
        if self.written is not None:
            # How far the supervisor reads fd 1/2 before it handles this frame.
            msg = dict(msg, written=list(self.written))
        payload = encode(msg)
        if len(payload) > MAX_FRAME:
            if strict:
                raise FrameTooLarge("%s of %d bytes is larger than the %d MiB frame limit" % (
                    msg.get("type"), len(payload), MAX_FRAME >> 20))
            payload = _too_big(msg, len(payload))
        frame = len(payload).to_bytes(4, "big") + payload
        if _thread.get_ident() == self.main_thread:
            with self.gate.shielded():
                self._write(frame)
        else:
            self._write(frame)

    def _write(self, frame):
        view = memoryview(frame)
        with self._write_lock:
            while view:
                try:
                    written = os.write(self.fd, view)
                except (BrokenPipeError, ConnectionResetError):
                    _supervisor_gone()
                view = view[written:]
            self._frame_unread = True

    def wait_until_read(self):
        """Block until the supervisor has read every frame sent so far.

        The supervisor drains fd 1/2 before handling a frame, so text written while a frame
        is still unread could be shown before it. Streams call this before writing; it
        costs one turn of the supervisor's loop, and nothing when no frame is pending."""
        if not self._frame_unread or not self._can_watch_reads:
            return
        import fcntl
        import time
        delay, waited = 0.00002, 0.0
        while True:
            try:
                unread = int.from_bytes(fcntl.ioctl(self.fd, SIOCOUTQ, b"\0\0\0\0"),
                                        sys.byteorder)
            except OSError:
                self._can_watch_reads = False  # not Linux, or not a unix socket
                return
            if unread == 0 or waited >= READ_WAIT_LIMIT:
                self._frame_unread = False
                return
            time.sleep(delay)
            waited += delay
            delay = min(delay * 2, 0.002)

    # -- a rollback's hand-over (checkpoints.py) ------------------------------------------
    def hold_writes(self):
        """No other thread's frame is half written, and none is written after this."""
        self._write_lock.acquire()

    def release_writes(self):
        self._write_lock.release()

    def state(self):
        """What this channel read of fd 3 and has not served, for the worker a rollback makes."""
        return {"inbox": self._inbox.hex(), "deferred": self._deferred}

    def restore(self, state):
        self._inbox = bytearray.fromhex(state["inbox"])
        self._deferred = list(state["deferred"])
        self._frame_unread = True  # the last worker's frame may still be unread
        self._write_lock = _thread.allocate_lock()  # a thread may have held it at the fork
        self.main_thread = _thread.get_ident()

    # -- receiving ---------------------------------------------------------------------
    def next_request(self):
        """The next frame for the idle loop (frames held back while a cell waited first);
        None once the supervisor closed the socket."""
        if self._deferred:
            return self._deferred.pop(0)
        return self._receive(interruptible=False)

    def frame_ready(self):
        """True when the next request is already in hand (no need to wait for fd 3)."""
        if self._deferred:
            return True
        inbox = self._inbox
        return len(inbox) >= 4 and len(inbox) >= 4 + int.from_bytes(inbox[:4], "big")

    def wait_for(self, kind):
        """Inside a cell: block until a frame of type `kind` arrives, keeping the others
        for the idle loop (or, comm messages, for the cell's next await). KeyboardInterrupt
        (SIGINT) ends the wait."""
        while True:
            msg = self._receive(interruptible=True)
            if msg is None:
                _supervisor_gone()
            if msg.get("type") == kind:
                return msg
            self._keep(msg)

    def _keep(self, msg):
        self._deferred.append(msg)
        if msg.get("type") == "comm" and self.comm_waiting is not None:
            self.comm_waiting()

    def read_arrived(self):
        """From the loop while a cell awaits, fd 3 readable: what arrived is read without
        blocking, and its frames kept in order (take_comms gives the comm messages)."""
        import select
        if not select.select([self.fd], [], [], 0)[0]:
            return
        with self.gate.shielded():
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            except ConnectionResetError:
                chunk = b""
            self._inbox += chunk
        if not chunk:
            _supervisor_gone()
        while True:
            msg = self._pop_frame()
            if msg is None:
                return
            self._keep(msg)

    def holds_comm(self, cell_id):
        return any(_during(msg, cell_id) for msg in self._deferred)

    def take_comms(self, cell_id):
        """The `comm` frames handed during the cell `cell_id`, put aside so far, in order,
        taken out; the others stay."""
        comms = [msg for msg in self._deferred if _during(msg, cell_id)]
        if comms:
            self._deferred = [msg for msg in self._deferred if not _during(msg, cell_id)]
        return comms

    def _receive(self, interruptible):
        while True:
            msg = self._pop_frame()
            if msg is not None:
                return msg
            if interruptible and not _wait_readable(self.fd, self.gate.wakeup):
                # Woken by a signal's byte alone (its handler ran here, or earlier, elsewhere,
                # leaving the byte): a read now would block under the shield, where the next
                # interrupt only waits. Wait again.
                continue
            with self.gate.shielded():
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except ConnectionResetError:
                    chunk = b""
                if chunk:
                    self._inbox += chunk
            if not chunk:
                return None

    def _pop_frame(self):
        while len(self._inbox) >= 4:
            size = int.from_bytes(self._inbox[:4], "big")
            if len(self._inbox) < 4 + size:
                return None
            payload = bytes(self._inbox[4:4 + size])
            del self._inbox[:4 + size]
            msg = decode(payload)
            if msg is not None:
                return msg
        return None


def decode(payload):
    """A frame's payload from the supervisor as a dict; None for one that is not a JSON object
    (the supervisor is trusted: a bad frame is dropped, not fatal)."""
    try:
        msg = _loads(payload.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return msg if isinstance(msg, dict) else None


def _during(msg, cell_id):
    return msg.get("type") == "comm" and cell_id is not None and msg.get("during") == cell_id


def _wait_readable(fd, wakeup=None):
    """True once fd has something to read; False when only the signal wakeup pipe woke the
    wait (interrupts.py: it sees a SIGINT delivered to any thread, a user's or IPython's)."""
    import select
    if wakeup is not None and not wakeup.still_ours():
        wakeup = None  # a cell closed it: its number may be another file now
    watched = [fd] if wakeup is None else [fd, wakeup.fd]
    ready, _, _ = select.select(watched, [], [])
    if wakeup is not None and wakeup.fd in ready:
        wakeup.take()  # the handler itself runs at the next bytecode, here
    return fd in ready


def _supervisor_gone():
    # Nobody is left to report to: leave at once, without running more user code.
    os._exit(0)
