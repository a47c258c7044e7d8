"""Entry point: `from belljar_worker.main import serve; serve()`.

Only cheap modules are imported before `hello` is sent; the session (ast, formatting, ...)
is built right after it, while the supervisor is still setting up the client side.
"""
import os
import sys

FRAMES_FD = 3
DEBUG_FD = 4


def _environment():
    # Like ipykernel: pagers and colour-aware tools behave for a non-terminal frontend.
    # (matplotlib's backend is chosen when matplotlib is imported, see Session: exporting
    # MPLBACKEND would break `!python script.py`, which cannot import this package.)
    os.environ.setdefault("PAGER", "cat")
    os.environ.setdefault("GIT_PAGER", "cat")
    os.environ.setdefault("CLICOLOR", "1")
    sys.argv = [""]


def _debug_channel_given():
    """The supervisor hands a debug channel on fd 4 (worker/PROTOCOL.md)."""
    import stat
    try:
        return stat.S_ISSOCK(os.fstat(DEBUG_FD).st_mode)
    except OSError:
        return False


def _debugpy_found():
    from .debugger import available
    return available()


def hello_frame(debugger):
    version = "%d.%d.%d" % sys.version_info[:3]
    return {
        "type": "hello",
        "language_info": {
            "name": "python",
            "version": version,
            "mimetype": "text/x-python",
            "file_extension": ".py",
            "pygments_lexer": "ipython3",
            "codemirror_mode": {"name": "ipython", "version": 3},
            "nbconvert_exporter": "python",
        },
        "banner": "Python %s\nbelljar: a Python session behind glass" % sys.version,
        "pid": os.getpid(),
        "debugger": debugger,
    }


def serve():
    from .interrupts import InterruptGate, MissedInterrupts
    from .streams import OutputStreams
    from .wire import FrameChannel

    _environment()
    from . import current
    current.workspace = os.getcwd()
    gate = InterruptGate()
    gate.install()
    streams = OutputStreams()
    streams.after_flush = MissedInterrupts(gate).check
    streams.start_flusher()
    channel = FrameChannel(FRAMES_FD, gate, streams.flush, streams.written)
    streams.before_write = channel.wait_until_read
    can_debug = _debug_channel_given() and _debugpy_found()
    channel.send(hello_frame(can_debug))

    from .session import Session
    session = Session(channel, gate, streams)
    if can_debug:
        from . import current, debugger
        session.debugger = debugger.start(streams, lambda: current.session)
        gate.before_interrupt = session.debugger.before_interrupt
    while True:
        session.between_requests()
        try:
            request = channel.next_request()
        except MemoryError:
            # A request bigger than --memory allows (a file uploaded from the page, say) where
            # the limit is the address space rather than a cgroup: the frame may be half read,
            # so the channel cannot go on. Say why, in place of a traceback of our own code.
            os.write(2, b"[belljar] a request from the frontend did not fit in the sandbox's "
                        b"memory limit (--memory): the session ends\n")
            os._exit(1)
        if request is None:
            break  # the supervisor closed fd 3: the session is over
        session.handle(request)
    streams.flush()
