"""fd 4, the debug channel: the supervisor's debug_request frames in, debug_reply,
debug_event and debug_state frames out.

The same framing as fd 3 (a 4-byte big-endian length, then JSON), and every frame carries
`written` as fd 3's do, so text printed before a breakpoint is shown before its `stopped`
event. A socket of its own because only the main thread reads fd 3, and at a breakpoint the
main thread is the one that is stopped (worker/PROTOCOL.md, "The debug channel").
"""
import _thread
import os

from ..wire import MAX_FRAME, decode, encode

DEBUG_FD = 4


class ChannelClosed(Exception):
    """The supervisor closed fd 4: the session is over."""


class DebugChannel:
    def __init__(self, streams, fd=DEBUG_FD):
        self.fd = fd
        self._streams = streams
        self._lock = _thread.allocate_lock()
        self.closed = False

    def wait_readable(self, seconds):
        """Whether a frame has begun to arrive within `seconds`."""
        import select
        try:
            return bool(select.select([self.fd], [], [], seconds)[0])
        except InterruptedError:
            return False

    def receive(self):
        """The next frame from the supervisor, as a dict (None for one that isn't JSON)."""
        size = int.from_bytes(self._read_exact(4), "big")
        return decode(self._read_exact(size))

    def send(self, msg):
        # Text printed before this frame must reach the pipes, and be counted, before it.
        self._streams.flush_own()
        msg = dict(msg, written=list(self._streams.written))
        payload = encode(msg)
        if len(payload) > MAX_FRAME:
            # Never a frame the supervisor would take for a fault: the request fails instead.
            payload = encode({k: v for k, v in msg.items() if k != "content"} | {
                "content": _too_large(msg.get("content"), len(payload))})
        frame = memoryview(len(payload).to_bytes(4, "big") + payload)
        with self._lock:
            while frame:
                try:
                    n = os.write(self.fd, frame)
                except (BrokenPipeError, ConnectionResetError):
                    raise ChannelClosed() from None
                frame = frame[n:]

    def _read_exact(self, n):
        data = bytearray()
        while len(data) < n:
            chunk = os.read(self.fd, min(n - len(data), 1 << 20))
            if not chunk:
                raise ChannelClosed()
            data += chunk
        return bytes(data)


def _too_large(content, size):
    content = content if isinstance(content, dict) else {}
    return {"type": "response", "request_seq": content.get("request_seq"),
            "command": content.get("command"), "success": False,
            "message": "the answer of %d bytes is larger than the %d MiB frame limit"
                       % (size, MAX_FRAME >> 20)}
