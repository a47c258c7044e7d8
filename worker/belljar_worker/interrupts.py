"""What SIGINT does in the worker: KeyboardInterrupt in user code, nothing while idle.

Between requests the session's asyncio loop may run user code (event_loop.py): there an
interrupt raises only in code that holds the loop; one that still turns is left alone.

A SIGINT that lands while the worker writes or reads a frame is held back until the frame
is complete, so the supervisor never sees half a frame and no reply bytes are lost. One that
lands inside the import machinery is delivered again a moment later: raised there, Python may
swallow it (in the callbacks importlib runs, a module lock's weakref callback: "Exception
ignored in ... cb") and the cell would run on as if never interrupted.

A SIGINT can also reach the process without its handler running: Python runs the handler on
the main thread at its next bytecode, so one delivered to another thread, or to the main thread
while it waits for the GIL just before a blocking call (time.sleep, a read), waits until that
call returns. MissedInterrupts sees every SIGINT (the signal wakeup pipe) from the flusher
thread and sends the main thread another until its handler has run.
"""
import _thread
import os
import time

# After this long without the handler having run, the main thread gets the SIGINT again; then
# once a second while the handler still has not run (C code that never checks for signals).
REDELIVER_AFTER = 0.1
REDELIVER_EVERY = 1.0


class InterruptGate:
    def __init__(self):
        self.in_user_code = False
        self.handled = 0  # how many times the handler has run (MissedInterrupts counts on it)
        self.wakeup = None  # the read end of the signal wakeup pipe, once installed
        self._shield_depth = 0
        self._pending = False
        # While the event loop runs between requests: its watch, which says whether an
        # interrupt is for the code running now (event_loop.LoopWatch).
        self.between_requests = None
        # Set when the session can debug: ends a pause at a breakpoint before the interrupt
        # unwinds the stopped frame (debugger/adapter.py).
        self.before_interrupt = None

    def install(self):
        """Become SIGINT's handler, on the main thread; the wakeup pipe too (see module doc)."""
        import _signal
        _signal.signal(_signal.SIGINT, self.handle_sigint)
        try:
            r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            _signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            self.wakeup = r
        except (ValueError, OSError, AttributeError):
            return  # no pipes left: interrupts work as Python's alone do
        os.register_at_fork(after_in_child=self._forget_wakeup_in_child)

    def _forget_wakeup_in_child(self):
        # A forked child (multiprocessing) shares the pipe: its signals are not ours to count,
        # and its handler must not take our bytes.
        self.wakeup = None
        try:
            import _signal
            _signal.set_wakeup_fd(-1)
        except (ValueError, OSError):
            pass

    def handle_sigint(self, signum, frame):
        # The bytes of every SIGINT so far are this run's: drained before it counts, so
        # MissedInterrupts never takes a byte for one that is still owed a run.
        drain(self.wakeup)
        self.handled += 1
        if not self.in_user_code:
            return  # idle: the supervisor's interrupt has nothing to stop
        watch = self.between_requests
        if watch is not None and not watch.interrupt_lands():
            return  # the loop turns: the request behind it is read at its next turn
        if self._shield_depth:
            self._pending = True
            return
        if frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            _deliver_again()
            return
        if self.before_interrupt is not None:
            self.before_interrupt()
        raise KeyboardInterrupt

    def enter_user_code(self):
        self._pending = False
        self.in_user_code = True

    def leave_user_code(self):
        self.in_user_code = False
        self._pending = False

    def shielded(self):
        """Context manager for a frame transfer: an interrupt waits until it is over."""
        return _Shield(self)


class _Shield:
    __slots__ = ("gate",)

    def __init__(self, gate):
        self.gate = gate

    def __enter__(self):
        self.gate._shield_depth += 1

    def __exit__(self, exc_type, exc, tb):
        gate = self.gate
        gate._shield_depth -= 1
        if gate._shield_depth == 0 and gate._pending:
            gate._pending = False
            if gate.in_user_code and exc_type is None:
                raise KeyboardInterrupt
        return False


class MissedInterrupts:
    """From the flusher thread, after each flush: a SIGINT whose byte came through the wakeup
    pipe but whose handler has not run since is sent to the main thread again (a real signal:
    the blocking call it waits in returns, and the handler runs). Only the handler's run
    settles it, so an interrupt is never lost and never doubled while it is handled."""

    def __init__(self, gate):
        self.gate = gate
        self.main_thread = _thread.get_ident()  # made on the main thread, as the gate is
        self._owed_since = None  # when a SIGINT's byte was seen with no handler run after it
        self._handled_then = 0
        self._sent_at = None

    def check(self, now=None):
        gate = self.gate
        handled = gate.handled  # before the read: a run after it settles what the read finds
        if gate.wakeup is None:
            self._owed_since = None
            return
        import _signal
        if _signal.SIGINT in drain(gate.wakeup) and self._owed_since is None:
            self._owed_since = time.monotonic() if now is None else now
            self._handled_then, self._sent_at = handled, None
        if self._owed_since is None:
            return
        if gate.handled != self._handled_then:
            self._owed_since = None
            return
        now = time.monotonic() if now is None else now
        due = (self._owed_since + REDELIVER_AFTER if self._sent_at is None
               else self._sent_at + REDELIVER_EVERY)
        if now >= due:
            self._sent_at = now
            try:
                _signal.pthread_kill(self.main_thread, _signal.SIGINT)
            except (OSError, ProcessLookupError):
                self._owed_since = None


def drain(fd):
    """The bytes waiting in the non-blocking pipe fd (b"" for None or an empty pipe)."""
    if fd is None:
        return b""
    got = b""
    while True:
        try:
            chunk = os.read(fd, 512)
        except (BlockingIOError, InterruptedError):
            return got
        except OSError:
            return got
        if not chunk:
            return got
        got += chunk


def _deliver_again(delay=0.01):
    """SIGINT to the main thread once `delay` has passed (a real signal: a blocking read wakes)."""
    import signal
    import threading
    timer = threading.Timer(delay, signal.pthread_kill,
                            (threading.main_thread().ident, signal.SIGINT))
    timer.daemon = True
    timer.start()
