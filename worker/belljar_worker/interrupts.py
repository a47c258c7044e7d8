"""What SIGINT does in the worker: KeyboardInterrupt in user code, nothing while idle.

Between requests the session's asyncio loop may run user code (event_loop.py): there an
interrupt raises only in code that holds the loop; one that still turns is left alone.

A SIGINT that lands while the worker writes or reads a frame is held back until the frame
is complete, so the supervisor never sees half a frame and no reply bytes are lost. One that
lands inside the import machinery is delivered again a moment later: raised there, Python may
swallow it (in the callbacks importlib runs, a module lock's weakref callback: "Exception
ignored in ... cb") and the cell would run on as if never interrupted.
"""


class InterruptGate:
    def __init__(self):
        self.in_user_code = False
        self._shield_depth = 0
        self._pending = False
        # While the event loop runs between requests: its watch, which says whether an
        # interrupt is for the code running now (event_loop.LoopWatch).
        self.between_requests = None
        # Set when the session can debug: ends a pause at a breakpoint before the interrupt
        # unwinds the stopped frame (debugger/adapter.py).
        self.before_interrupt = None

    def handle_sigint(self, signum, frame):
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


def _deliver_again(delay=0.01):
    """SIGINT to the main thread once `delay` has passed (a real signal: a blocking read wakes)."""
    import signal
    import threading
    timer = threading.Timer(delay, signal.pthread_kill,
                            (threading.main_thread().ident, signal.SIGINT))
    timer.daemon = True
    timer.start()
