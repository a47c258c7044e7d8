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
thread and, while the gate's handler has not run for it, pokes the main thread: SIGWINCH,
whose handler does nothing, ends the blocking call (EINTR), and Python then runs the SIGINT
handler still pending. No SIGINT is ever sent again, so an interrupt is never doubled, whatever
handler the cell installed.
"""
import _thread
import os
import time

# After this long without the handler having run, the main thread is poked; then once a second,
# at most MAX_POKES times (C code that never checks for signals would be poked in vain).
POKE_AFTER = 0.1
POKE_EVERY = 1.0
MAX_POKES = 5
# The poke is SIGWINCH: ignored by default (a cell that sets SIG_DFL or SIG_IGN on it only turns
# the pokes off), and with no terminal nothing else ever sends it.


def _poked(signum, frame):
    """The poke's handler: nothing. Its arrival is the point (the blocking call returns)."""


class InterruptGate:
    def __init__(self):
        self.in_user_code = False
        self.handled = 0  # how many times the handler has run (MissedInterrupts counts on it)
        self.wakeup = None  # the signal wakeup pipe (WakeupPipe), once installed
        self._shield_depth = 0
        self._pending = False
        # While the event loop runs between requests: its watch, which says whether an
        # interrupt is for the code running now (event_loop.LoopWatch).
        self.between_requests = None
        # Set when the session can debug: ends a pause at a breakpoint before the interrupt
        # unwinds the stopped frame (debugger/adapter.py).
        self.before_interrupt = None

    def install(self):
        """Become SIGINT's handler, on the main thread; the wakeup pipe and the poke's handler too
        (see the module's doc)."""
        import _signal
        _signal.signal(_signal.SIGINT, self.handle_sigint)
        try:
            self.wakeup = WakeupPipe()
            _signal.signal(_signal.SIGWINCH, _poked)
        except (ValueError, OSError, AttributeError):
            self.wakeup = None
            return  # no pipes left: interrupts work as Python's alone do
        os.register_at_fork(after_in_child=self._forget_wakeup_in_child)

    def reinstall(self):
        """In the worker a rollback made (checkpoints.py): SIGINT is the gate's again, with a
        wakeup pipe of its own (the fork forgot the one it shared)."""
        import _signal
        _signal.signal(_signal.SIGINT, self.handle_sigint)
        try:
            self.wakeup = WakeupPipe()
        except (ValueError, OSError, AttributeError):
            self.wakeup = None

    def installed(self):
        """Whether SIGINT's handler is still the gate's (a cell may install its own)."""
        import _signal
        return _signal.getsignal(_signal.SIGINT) == self.handle_sigint

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
        if self.wakeup is not None:
            self.wakeup.take()
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


class WakeupPipe:
    """The pipe Python's C signal handler writes each signal's number to (set_wakeup_fd), read
    without blocking. A cell may close the descriptor and another file take its number: the
    pipe is known by its identity, and that file is never read."""

    def __init__(self):
        import _signal
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            _signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except (ValueError, OSError):
            os.close(r)
            os.close(w)
            raise
        self.fd = r
        st = os.fstat(r)
        self._identity = (st.st_dev, st.st_ino)

    def fileno(self):
        return self.fd

    def still_ours(self):
        try:
            st = os.fstat(self.fd)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._identity

    def take(self):
        """The signal numbers written since the last take (b"" when none, or not ours now)."""
        if not self.still_ours():
            return b""
        got = b""
        while True:
            try:
                chunk = os.read(self.fd, 512)
            except (BlockingIOError, InterruptedError):
                return got
            except OSError:
                return got
            if not chunk:
                return got
            got += chunk


class MissedInterrupts:
    """From the flusher thread, after each flush: a SIGINT whose byte came through the wakeup
    pipe while a request's code runs, and whose handler (the gate's) has not run since, gets
    the main thread poked (SIGWINCH, see the module's doc): after POKE_AFTER, then each POKE_EVERY,
    at most MAX_POKES times. Only the gate's handler settles it; a cell that installed its own
    SIGINT handler is left to it."""

    def __init__(self, gate):
        self.gate = gate
        self.main_thread = _thread.get_ident()  # made on the main thread, as the gate is
        self._owed_since = None  # when a SIGINT's byte was seen with no handler run after it
        self._handled_then = 0
        self._poked_at = None
        self._pokes = 0

    def check(self, now=None):
        gate = self.gate
        handled = gate.handled  # before the read: a run after it settles what the read finds
        if gate.wakeup is None:
            self._owed_since = None
            return
        import _signal
        seen = _signal.SIGINT in gate.wakeup.take()
        now = time.monotonic() if now is None else now
        if seen and self._owed_since is None:
            self._owed_since, self._handled_then = now, handled
            self._poked_at, self._pokes = None, 0
        if self._owed_since is None:
            return
        if (gate.handled != self._handled_then or not gate.in_user_code
                or self._pokes >= MAX_POKES or not gate.installed()):
            self._owed_since = None  # handled, no code to interrupt, given up, or not ours
            return
        due = (self._owed_since + POKE_AFTER if self._poked_at is None
               else self._poked_at + POKE_EVERY)
        if now >= due:
            self._poked_at = now
            self._pokes += 1
            try:
                _signal.pthread_kill(self.main_thread, _signal.SIGWINCH)
            except (OSError, ProcessLookupError):
                self._owed_since = None


def _deliver_again(delay=0.01):
    """SIGINT to the main thread once `delay` has passed (a real signal: a blocking read wakes)."""
    import signal
    import threading
    timer = threading.Timer(delay, signal.pthread_kill,
                            (threading.main_thread().ident, signal.SIGINT))
    timer.daemon = True
    timer.start()
